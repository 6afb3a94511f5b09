"""The seed snippets the course corrects, reproduced faithfully so each chapter can show the mistake and the fix side
by side: the seed's functions (``functions``), its models (``models``) and its planning table (``planning``).
"""
