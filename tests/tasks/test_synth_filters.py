"""Each run-time filter proven on a planted bad task (and a good task passing them all); the worker's restarts."""

from __future__ import annotations

import pytest

from rubric_rl.tasks.synth.probe import ProbeConfig, probe, rebinding_statements
from rubric_rl.tasks.synth.worker import ProbeWorker


def program(forward: str, init: str = "pass", inputs: str = "[torch.randn(16, 64)]", imports: str = "") -> str:
    return f"""import torch
import torch.nn as nn
import torch.nn.functional as F
{imports}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
{forward}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""


def body(*lines: str) -> str:
    return "\n".join(f"        {line}" for line in lines)


GOOD = program(
    body("x = self.fc(x)", "x = torch.relu(x)", "x = x * 2.0", "return x"), init="self.fc = nn.Linear(64, 32)"
)
WIDE = (0.0, 1e9)

PLANTED = [
    ("good", GOOD, {}, None, None),
    ("raises", program(body("return x @ torch.ones(3, 3)")), {}, "runs_eager", "mat1 and mat2 shapes cannot be"),
    ("not finite", program(body("return torch.log(-x.abs() - 1.0)")), {}, "runs_eager", "NaN or Inf"),
    ("not a tensor", program(body("return 3.0")), {}, "runs_eager", "not tensors"),
    ("nondeterministic", program(body("return x + torch.randn_like(x)")), {}, "deterministic", "disagree"),
    ("dropout in training mode", program(body("return F.dropout(x, 0.5, training=True)")), {}, "deterministic", None),
    ("constant output", program(body("return torch.ones_like(x) * 3.0")), {}, "non_trivial", "constant"),
    ("softmax over one element", program(body("x = x[:, :1]", "return torch.softmax(x, dim=1)")), {},
     "non_trivial", "constant"),
    ("an input", program(body("y = torch.relu(x)", "return x")), {}, "non_trivial", "one of the inputs"),
    ("near zero", program(body("return torch.tanh(x) * 1e-6")), {}, "non_trivial", "near zero"),
    ("dead operator", program(body("x = torch.sigmoid(x)", "x = torch.relu(x)", "return x * 3.0")), {},
     "no_dead_op", "x = torch.relu(x)"),
    ("shift before softmax", program(body("x = x + 1.0", "x = torch.softmax(x, dim=1)", "return x")), {},
     "no_dead_op", "x = x + 1.0"),
    ("too slow", program(body("for _ in range(30):", "    x = torch.tanh(x @ x.T @ x)", "return x"),
                         inputs="[torch.randn(256, 256)]"), {"runtime_ms": (0.0, 1.0)}, "runtime", "outside"),
    ("too fast", GOOD, {"runtime_ms": (1000.0, 2000.0)}, "runtime", "outside"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "code", "cfg", "rejected_by", "error"), PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_tasks_are_removed_by_their_filter(name, code, cfg, rejected_by, error):
    config = ProbeConfig(compile=False, threads=1, **({"runtime_ms": WIDE} | cfg))
    result = probe(code, config)
    assert result["rejected_by"] == rejected_by, result
    if rejected_by is None:
        assert set(result["filters"]) == {"runs_eager", "deterministic", "non_trivial", "no_dead_op", "runtime"}
        assert all(m["passed"] for m in result["filters"].values())
        assert result["filters"]["no_dead_op"]["statements_checked"] == 3
        assert result["filters"]["runtime"]["median_ms"] > 0
        return
    failed = result["filters"][rejected_by]
    assert failed["passed"] is False
    if error is not None:
        assert error in failed["error"], failed


def test_measurements_are_recorded_for_every_filter_passed():
    result = probe(GOOD, ProbeConfig(compile=False, runtime_ms=WIDE))
    f = result["filters"]
    assert f["runs_eager"]["outputs"] == [[16, 32]] and f["runs_eager"]["params"] == 64 * 32 + 32
    assert f["deterministic"]["max_diff"] == 0.0
    assert f["non_trivial"]["draw_diff"] > 0 and f["non_trivial"]["max_abs"] > 0
    assert f["runtime"]["reps"] >= 1 and f["runtime"]["window_ms"] == list(WIDE)


def test_only_rebinding_statements_are_ablated():
    code = program(body("y = self.fc(x)", "y = torch.relu(y)", "z = y * 2.0", "return z"))
    assert rebinding_statements(code) == [1]


@pytest.mark.slow
def test_the_compile_filter_runs_torch_compile():
    result = probe(GOOD, ProbeConfig(compile=True, runtime_ms=WIDE, threads=1))
    assert result["rejected_by"] is None, result
    assert result["filters"]["compiles"]["max_diff_vs_eager"] < 1e-4


def test_worker_survives_hangs_and_crashes():
    hang = program(body("time.sleep(60)", "return x"), imports="import time")
    crash = program(body("os._exit(3)"), imports="import os")
    worker = ProbeWorker()
    cfg = ProbeConfig(compile=False, runtime_ms=WIDE).model_dump(mode="json")
    try:
        timed_out = worker.probe(hang, cfg, timeout_s=3)
        assert timed_out["rejected_by"] == "runs_eager"
        assert "timeout after 3 s" in timed_out["filters"]["runs_eager"]["error"]
        died = worker.probe(crash, cfg, timeout_s=60)
        assert "the worker died" in died["filters"]["runs_eager"]["error"] and "exit status 3" in died["filters"][
            "runs_eager"]["error"]  # fmt: skip
        assert worker.probe(GOOD, cfg, timeout_s=60)["rejected_by"] is None
        assert worker.restarts == 2
    finally:
        worker.close()
