"""Real-engine runs that a chapter itself makes and prints, checked as the chapter stores them instead of run a
second time (docs/authoring.md: each lab and world size once; ``tests/stored_outputs.py``). nbval re-executes each
chapter and fails when a fresh run prints anything else than what is stored; these checks fail when what is stored
is wrong, so a chapter re-executed and committed with a broken lab fails too. Each check is also fed broken copies
of the stored text and must name what is wrong.

- Chapter 09: real DeepSpeed ZeRO stages 1, 2, 3 on 2 gloo ranks (``zero_comm.stages_and_grid``, i.e.
  ``deepspeed_zero.train_stages`` for 3 steps, against ``deepspeed_zero.reference_losses(steps=3)``): the losses
  equal single-process PyTorch within 1e-5 and each rank stores the partition ZeRO says (optimizer states sharded
  at every stage, parameters only at stage 3), ranks in order.
- Chapter 13: the real ``torchrun --max-restarts=1`` job (16 steps, a checkpoint every 4, rank 1 SIGKILLs itself
  before step 7): exit code 0, attempt 1 resumes from step 4, both attempts' losses equal the untouched run's bit
  for bit, the final model and AdamW state too, the process killed was attempt 0's rank 1 and none is left alive.
"""
import re

from stored_outputs import stored_text

# ---------------------------------------------------------------- chapter 09: DeepSpeed ZeRO stages
ZERO_ROW = re.compile(r"^\s*(\d)\s+(\d)\s+([\d,]+)\s+([\d,]+)\s+(\S+)\s*$", re.M)


def _int(s: str) -> int:
    return int(s.replace(",", ""))


def zero_stage_problems(text: str, tol: float = 1e-5) -> list[str]:
    """What is wrong in chapter 09's printed table of ZeRO stages (``Ψ = … parameters``, then rows of stage, rank,
    parameters stored, Adam exp_avg elements, max |loss − single process|, rank 0's rows first); empty when
    nothing is."""
    psi = re.search(r"Ψ = ([\d,]+) parameters", text)
    if psi is None:
        return ["no 'Ψ = … parameters' line"]
    n, rows = _int(psi.group(1)), ZERO_ROW.findall(text)
    problems = []
    got = [(int(stage), int(rank)) for stage, rank, *_ in rows]
    if got != [(stage, rank) for rank in (0, 1) for stage in (1, 2, 3)]:
        problems.append(f"rows for (stage, rank) {got}, not stages 1-3 of rank 0, then of rank 1")
    for stage, rank, params, moments, diff in rows:
        where = f"stage {stage}, rank {rank}"
        if not float(diff) < tol:   # (a NaN is not below it either)
            problems.append(f"{where}: the losses differ from one process by {diff}")
        if abs(_int(moments) - n / 2) > 2:   # DeepSpeed pads each rank's flat partition by at most a few elements
            problems.append(f"{where}: {moments} Adam elements, not Ψ/2 = {n / 2:,.0f}")
        want = n / 2 if stage == "3" else n
        if abs(_int(params) - want) > 2:
            problems.append(f"{where}: {params} parameters stored, not {want:,.0f}")
    return problems


def _ch09() -> str:
    return stored_text("09_deepspeed_fsdp", "zlab.stages_and_grid")


def test_zero_stages_match_single_process_and_partition():
    assert zero_stage_problems(_ch09()) == []


def test_the_zero_stage_check_fails_on_a_wrong_table():
    text = _ch09()
    rows = list(ZERO_ROW.finditer(text))
    stage3 = next(m for m in rows if m.group(1) == "3")
    full = rows[0].group(3)                                                      # stage 1 stores every parameter

    def edit(m, group, value):
        return text[:m.start(group)] + value + text[m.end(group):]

    assert zero_stage_problems(edit(stage3, 3, full)) == [                       # stage 3 keeps every parameter
        f"stage 3, rank 0: {full} parameters stored, not {_int(full) / 2:,.0f}"]
    assert zero_stage_problems(edit(stage3, 5, "2.4e-03")) == [                   # a wrong gradient average
        "stage 3, rank 0: the losses differ from one process by 2.4e-03"]
    assert zero_stage_problems(edit(stage3, 4, full)) == [                       # Adam state not sharded
        f"stage 3, rank 0: {full} Adam elements, not Ψ/2 = {_int(full) / 2:,.0f}"]
    assert zero_stage_problems(edit(rows[-1], 2, "0"))[0].startswith("rows for (stage, rank)")   # ranks mixed up
    assert zero_stage_problems(text.replace(stage3.group(0), "")) != []          # a row missing
    assert zero_stage_problems(text.replace("Ψ =", "N =")) == ["no 'Ψ = … parameters' line"]


# ---------------------------------------------------------------- chapter 13: torchrun kill and restart
CH13_STEPS, CH13_KILL, CH13_RESUME = 16, 7, 4   # its run: 16 steps, a checkpoint every 4, killed before step 7
TABLE_ROW = re.compile(r"^\s*(\d+)\s+(\d\.\d{4})\s+(\d\.\d{4}|—)\s+(\d\.\d{4}|—)\s*$", re.M)
MUST_BE_TRUE = ("attempt 0 equals the untouched run bit for bit until the kill (steps 1–6):",
                "the process killed was attempt 0's rank 1:",
                "attempt 1 equals the untouched run bit for bit from the restart point (steps 5–16):",
                "final model and optimizer state equal bit for bit:")


def torchrun_restart_problems(events: str, table: str) -> list[str]:
    """What chapter 13's printed torchrun kill and restart shows wrong (``events``: the output of the cell that runs
    it, ``table``: the loss-table cell's); empty when nothing is."""
    problems = []
    if not re.search(r"^torchrun exit code after the kill and the restart: 0 ", events, re.M):
        problems.append("torchrun did not exit with 0")
    starts = re.findall(r"attempt (\d+) \(TORCHELASTIC_RESTART_COUNT=(\d+)\): resumed from step (\d+)", events)
    if starts != [("0", "0", "0"), ("1", "1", str(CH13_RESUME))]:
        problems.append(f"attempts (attempt, restart count, resumed from) {starts}, not [(0, 0, 0), (1, 1, 4)]")
    if re.findall(r"rank (\d+) sent itself SIGKILL before step (\d+)", events) != [("1", str(CH13_KILL))]:
        problems.append(f"not one kill, of rank 1 before step {CH13_KILL}")
    if "local_rank 1 failed with exitcode -9, then restarted the worker group" not in events:
        problems.append("torchrun's agent did not report rank 1's exit code -9 and a restart")
    rows = TABLE_ROW.findall(table)
    if [int(r[0]) for r in rows] != list(range(1, CH13_STEPS + 1)):
        problems.append(f"loss table rows {[r[0] for r in rows]}, not steps 1-{CH13_STEPS}")
    for step, untouched, first, second in rows:
        step = int(step)
        if first != (untouched if step < CH13_KILL else "—"):
            problems.append(f"step {step}: attempt 0 shows {first}, untouched run {untouched}")
        if second != (untouched if step > CH13_RESUME else "—"):
            problems.append(f"step {step}: attempt 1 shows {second}, untouched run {untouched}")
    for line in MUST_BE_TRUE:
        if not re.search("^" + re.escape(line) + r".*\sTrue$", table, re.M):
            problems.append(f"not True: {line}")
    if not re.search(r"^worker processes still alive \(all attempts\):.*\s\[\]$", table, re.M):
        problems.append("a worker process outlived the run")
    return problems


def _ch13() -> tuple[str, str]:
    return (stored_text("13_fault_tolerance", "lab.run_torchrun("),
            stored_text("13_fault_tolerance", "run.log.losses(0)"))


def test_torchrun_restart_resumes_exactly():
    assert torchrun_restart_problems(*_ch13()) == []


def test_the_torchrun_check_fails_on_a_wrong_run():
    events, table = _ch13()
    assert torchrun_restart_problems(events.replace("resumed from step 4", "resumed from step 0"), table) == [
        "attempts (attempt, restart count, resumed from) [('0', '0', '0'), ('1', '1', '0')], not [(0, 0, 0), (1, 1, 4)]"]
    m = next(m for m in TABLE_ROW.finditer(table) if m.group(1) == "9")
    drifted = table[:m.start(4)] + "9.9999" + table[m.end(4):]                   # attempt 1 drifts at step 9
    assert torchrun_restart_problems(events, drifted) == [f"step 9: attempt 1 shows 9.9999, untouched run {m.group(2)}"]
    for line in MUST_BE_TRUE:
        unequal = re.sub("^(" + re.escape(line) + r".*\s)True$", r"\1False", table, flags=re.M)
        assert torchrun_restart_problems(events, unequal) == [f"not True: {line}"]
    alive = re.sub(r"(still alive \(all attempts\):.*\s)\[\]$", r"\1[4242]", table, flags=re.M)
    assert torchrun_restart_problems(events, alive) == ["a worker process outlived the run"]
    assert len(torchrun_restart_problems("", "")) >= 5
