"""The course's shared ground, used by every topic: the reader's language (``i18n``, ``language``, ``cli``), validation
at the boundary (``validate``), real multi-process runs (``launch``, ``lab_smoke``), the simulated cluster and its
collectives (``comm``), the α-β cost model (``cost``), GPU presets (``hardware``), model configs and the transformer
(``models``, ``transformer``, ``moe``), shared plotting (``plots``), the exercise-checker framework (``check``), the
explorer framework (``explorer``) and the environment report (``env``, chapter 00).
"""
