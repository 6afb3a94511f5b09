"""Chapter 06, ZeRO and FSDP: flat parameters, units and the sharded step (``simulation``), the collectives of one step
per engine (``traffic``), the explorer, the FSDP2 labs and the checker.
"""
