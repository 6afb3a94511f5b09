"""Authoring tools of the course (not imported by any chapter): pairing and executing notebooks, building
exercises, bilingual parity and the glossary, monolingual copies, the language audit, the website glue and grading.
"""
