"""Real DeepSpeed ZeRO stages 1, 2, 3 on 2 gloo ranks: losses equal single-process PyTorch within 1e-5, and each
rank stores the partition ZeRO says it should (optimizer states sharded at every stage, parameters only at stage 3).

Chapter 09 runs exactly this launch (``zero_comm.stages_and_grid``, i.e. ``deepspeed_zero.train_stages`` for stages
1, 2, 3 and 3 steps on 2 ranks, against ``deepspeed_zero.reference_losses(steps=3)``) and prints one row per stage
and rank. This module checks those rows as the chapter stores them (``tests/stored_outputs.py``; nbval checks that a
fresh run prints the same) instead of starting DeepSpeed a second time, and is fed broken copies so that it is seen
to fail."""
import re

from stored_outputs import stored_text

ROW = re.compile(r"^\s*(\d)\s+(\d)\s+([\d,]+)\s+([\d,]+)\s+(\d\.\de[+-]\d+)\s*$", re.M)


def _int(s: str) -> int:
    return int(s.replace(",", ""))


def zero_stage_problems(text: str, tol: float = 1e-5) -> list[str]:
    """What is wrong in chapter 09's printed table of ZeRO stages (``Ψ = … parameters``, then rows of stage, rank,
    parameters stored, Adam exp_avg elements, max |loss − single process|); empty when nothing is."""
    psi = re.search(r"Ψ = ([\d,]+) parameters", text)
    if psi is None:
        return ["no 'Ψ = … parameters' line"]
    n, rows = _int(psi.group(1)), ROW.findall(text)
    problems = []
    got = sorted((int(stage), int(rank)) for stage, rank, *_ in rows)
    if got != [(stage, rank) for stage in (1, 2, 3) for rank in (0, 1)]:
        problems.append(f"rows for (stage, rank) {got}, not stages 1-3 on ranks 0 and 1")
    for stage, rank, params, moments, diff in rows:
        where = f"stage {stage}, rank {rank}"
        if float(diff) >= tol:
            problems.append(f"{where}: the losses differ from one process by {diff}")
        if abs(_int(moments) - n / 2) > 2:   # DeepSpeed pads each rank's flat partition by at most a few elements
            problems.append(f"{where}: {moments} Adam elements, not Ψ/2 = {n / 2:,.0f}")
        want = n / 2 if stage == "3" else n
        if abs(_int(params) - want) > 2:
            problems.append(f"{where}: {params} parameters stored, not {want:,.0f}")
    return problems


def test_zero_stages_match_single_process_and_partition():
    assert zero_stage_problems(stored_text("09_deepspeed_fsdp", "zlab.stages_and_grid")) == []


def test_the_check_fails_on_a_wrong_table():
    text = stored_text("09_deepspeed_fsdp", "zlab.stages_and_grid")
    rows = ROW.findall(text)
    stage3 = next(m for m in ROW.finditer(text) if m.group(1) == "3")
    unsharded = text[:stage3.start(3)] + rows[0][2] + text[stage3.end(3):]       # stage 3 keeps every parameter
    assert zero_stage_problems(unsharded) == [f"stage 3, rank {stage3.group(2)}: {rows[0][2]} parameters stored, "
                                              f"not {_int(rows[0][2]) / 2:,.0f}"]
    drifted = text[:stage3.start(5)] + "2.4e-03" + text[stage3.end(5):]         # a wrong gradient average
    assert zero_stage_problems(drifted) == [f"stage 3, rank {stage3.group(2)}: the losses differ from one process "
                                            "by 2.4e-03"]
    assert zero_stage_problems(text.replace(text[stage3.start():stage3.end()], "")) != []   # a row missing
