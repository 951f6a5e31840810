"""A task baseline whose worker hangs fails with where the worker hung."""

from pathlib import Path

import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.measure.baseline import BaselineError, measure_baseline

REFERENCE = """
import time
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        if x.numel() == 16:  # the timing's inputs, not the correctness trials' (a baseline runs no trials)
            time.sleep(3600)
        return x + 1


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_hung_baselines_error_says_where_the_worker_was(tmp_path: Path):
    cfg = SandboxConfig(
        backend="cpu",
        build={"cache_dir": tmp_path / "build"},
        timing={"compile_baseline": False},
        limits={"run_timeout_s": 8},
    )
    with pytest.raises(BaselineError) as caught:
        measure_baseline(REFERENCE, cfg)
    message = str(caught.value)
    assert "Deadline" in message and "the worker was at:" in message, message
    assert "forward" in message, message  # the reference's own frame: where it hung
