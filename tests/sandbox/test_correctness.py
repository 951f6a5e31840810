import pytest
import torch

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.config import Tolerance
from rubric_rl.sandbox.correctness import compare_outputs, compare_tensor, degenerate_task_flags

TOL = Tolerance(atol=1e-4, rtol=1e-4)


def meta(t):
    return {
        "kind": "tensor",
        "type": "torch.Tensor",
        "plain": True,
        "shape": list(t.shape),
        "dtype": str(t.dtype),
        "device": "cpu",
        "layout": "torch.strided",
    }


@pytest.mark.parametrize(
    "cand, ref, bad",
    [
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), 0),
        (torch.tensor([1.0, 2.00015]), torch.tensor([1.0, 2.0]), 0),  # within atol + rtol*|ref|
        (torch.tensor([1.0, 2.001]), torch.tensor([1.0, 2.0]), 1),
        (torch.tensor([float("nan")]), torch.tensor([float("nan")]), 1),  # NaN never passes
        (torch.tensor([float("inf")]), torch.tensor([float("inf")]), 0),
        (torch.tensor([float("inf")]), torch.tensor([1e30]), 1),
        (torch.tensor([-float("inf")]), torch.tensor([float("inf")]), 1),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), 1),
    ],
)
def test_compare_tensor(cand, ref, bad):
    assert compare_tensor(cand, ref, TOL)[0] == bad


def test_compare_outputs_messages():
    cfg = SandboxConfig()
    r = torch.ones(2, 3)

    def run(c_meta, c_val):
        return compare_outputs(c_meta, c_val, [meta(r)], [r], cfg, index=0, distribution="task", seed=1)

    assert run([meta(r)], [r.clone()]).passed
    assert "shape (3, 2)" in run([meta(r.t())], [r.t()]).error
    wrong_dtype = {**meta(r), "dtype": "torch.float16"}
    assert "dtype torch.float16" in run([wrong_dtype], [r.half()]).error
    sub = {**meta(r), "plain": False, "type": "x.LazyTensor"}
    assert "not a plain torch.Tensor" in run([sub], [r]).error
    assert "returned 2 output(s)" in run([meta(r), meta(r)], [r, r]).error
    res = run([meta(r)], [r + 1])
    assert not res.passed and res.mismatched == 6 and res.max_abs_error == pytest.approx(1.0)


def test_per_dtype_tolerance_is_configurable():
    cfg = SandboxConfig(tolerances={"float32": {"atol": 0.5, "rtol": 0.0}})
    r = torch.zeros(4)
    res = compare_outputs([meta(r)], [r + 0.4], [meta(r)], [r], cfg, index=0, distribution="task", seed=0)
    assert res.passed
    assert cfg.tolerances["float16"].atol == 1e-2  # the other defaults stay


def test_unknown_tolerance_dtype_is_rejected():
    with pytest.raises(ValueError, match="unknown dtype"):
        SandboxConfig(tolerances={"float31": {"atol": 1, "rtol": 1}})


def test_degenerate_flags():
    cfg = SandboxConfig()
    tiny = [[torch.full((10,), 1e-6)], [torch.full((10,), -1e-6)]]
    assert any("zeros" in f for f in degenerate_task_flags(tiny, cfg))
    const = [[torch.full((10,), 3.0)], [torch.full((10,), 3.0)]]
    flags = degenerate_task_flags(const, cfg)
    assert any("constant" in f for f in flags) and any("same outputs" in f for f in flags)
    healthy = [[torch.randn(100)], [torch.randn(100)]]
    assert degenerate_task_flags(healthy, cfg) == []
