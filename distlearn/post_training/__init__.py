"""Chapter 15, post-training: the RL step's timeline in two placements (``rl_timeline``), a real RL loop with a
trainer and a generator process (``lab_rl``), their figures, explorer and exercise checkers.
"""
