"""Chapter 06's FSDP2 exercise checkers: they accept answers computed from torch.chunk and FSDP2's own padding rule
(independent of distlearn), and reject the typical wrong ones."""
import math

import pytest
import torch

from distlearn.core import check
from distlearn.zero_fsdp import check as ch06


def rows_from_torch(d0, ws):                      # FSDP2's _chunk_with_empty: torch.chunk, empty past the end
    pieces = torch.chunk(torch.arange(d0), ws)
    return [len(p) for p in pieces] + [0] * (ws - len(pieces))


def padding_from_torch(shapes, ws):               # every rank's piece padded to the first torch.chunk piece
    # meta tensors: torch.chunk's real piece shapes without allocating (GPT-2's embedding took ~1 s per call) /
    # meta 张量：torch.chunk 给出真实的分块形状，但不分配内存
    n = sum(math.prod(s) for s in shapes)
    flat = torch.chunk(torch.empty(n, device="meta"), ws)
    fsdp1 = ws * flat[0].numel() - n
    fsdp2 = sum(ws * torch.chunk(torch.empty(s, device="meta"), ws)[0].numel() - math.prod(s) for s in shapes)
    return {"fsdp1": fsdp1, "fsdp2": fsdp2}


def test_checkers_accept_answers_from_torch(capsys):
    ch06.ex06_fsdp2_rows(rows_from_torch)
    ch06.ex06_padding_elements(padding_from_torch)
    assert [line[0] for line in capsys.readouterr().out.splitlines()] == ["✓", "✓"]


@pytest.mark.parametrize("checker,wrong", [
    # ceil-sized pieces for ranks 0..n-2 and the rest on the last rank: wrong when torch.chunk returns fewer pieces
    (ch06.ex06_fsdp2_rows, lambda d0, ws: [math.ceil(d0 / ws)] * (ws - 1) + [d0 - math.ceil(d0 / ws) * (ws - 1)]),
    (ch06.ex06_fsdp2_rows, lambda d0, ws: [d0 // ws + (r < d0 % ws) for r in range(ws)]),     # balanced split
    (ch06.ex06_padding_elements,                                                                # rows, not elements
     lambda shapes, ws: {**padding_from_torch(shapes, ws),
                         "fsdp2": sum(ws * math.ceil(s[0] / ws) - s[0] for s in shapes)}),
    (ch06.ex06_padding_elements, lambda shapes, ws: {"fsdp1": padding_from_torch(shapes, ws)["fsdp2"],
                                                      "fsdp2": padding_from_torch(shapes, ws)["fsdp1"]}),
])
def test_checkers_reject_typical_wrong_answers(checker, wrong):
    with pytest.raises(check.CheckFailed):
        checker(wrong)
