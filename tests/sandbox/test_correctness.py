import math

import pytest
import torch

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.config import Tolerance
from rubric_rl.sandbox.measure import correctness
from rubric_rl.sandbox.measure.correctness import compare_outputs, compare_tensor, degenerate_task_flags

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
        (torch.tensor([1.0]), torch.tensor([float("inf")]), 1),  # a finite value never passes an infinity
        (torch.tensor([1.0]), torch.tensor([float("nan")]), 1),
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
    cfg = SandboxConfig(correctness={"tolerances": {"float32": {"atol": 0.5, "rtol": 0.0}}})
    r = torch.zeros(4)
    res = compare_outputs([meta(r)], [r + 0.4], [meta(r)], [r], cfg, index=0, distribution="task", seed=0)
    assert res.passed
    assert cfg.correctness.tolerances["float16"].atol == 1e-2  # the other defaults stay


def test_unknown_tolerance_dtype_is_rejected():
    with pytest.raises(ValueError, match="unknown dtype"):
        SandboxConfig(correctness={"tolerances": {"float31": {"atol": 1, "rtol": 1}}})


def test_degenerate_flags():
    cfg = SandboxConfig()
    tiny = [[torch.full((10,), 1e-6)], [torch.full((10,), -1e-6)]]
    assert any("zeros" in f for f in degenerate_task_flags(tiny, cfg))
    const = [[torch.full((10,), 3.0)], [torch.full((10,), 3.0)]]
    flags = degenerate_task_flags(const, cfg)
    assert any("constant" in f for f in flags) and any("same outputs" in f for f in flags)
    healthy = [[torch.randn(100)], [torch.randn(100)]]
    assert degenerate_task_flags(healthy, cfg) == []


def spec_compare(cand: torch.Tensor, ref: torch.Tensor, tol: Tolerance, atol_scale: float | None):
    """The comparison as the module's docstring states it, one element at a time in Python floats."""
    c_vals, r_vals = cand.double().reshape(-1).tolist(), ref.double().reshape(-1).tolist()
    atol = tol.atol
    finite_r = [abs(r) for r in r_vals if math.isfinite(r)]
    if atol_scale is not None and finite_r:
        rms = math.sqrt(sum(a * a for a in finite_r) / len(finite_r))
        atol = min(atol, atol_scale * rms) if rms > 0 else atol
    bad, max_abs, max_rel = 0, 0.0, 0.0
    for c, r in zip(c_vals, r_vals, strict=True):
        if math.isinf(c) and c == r:
            continue  # the same infinity: no error
        if not (math.isfinite(c) and math.isfinite(r)):
            bad, max_abs, max_rel = bad + 1, math.inf, math.inf
            continue
        err = abs(c - r)
        bad += err > atol + tol.rtol * abs(r)
        max_abs, max_rel = max(max_abs, err), max(max_rel, err / max(abs(r), 1e-12))
    return bad, max_abs, max_rel


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_the_comparison_follows_its_specification_whatever_the_chunking(monkeypatch, seed, dtype):
    gen = torch.Generator().manual_seed(seed)
    n = 257
    ref = (torch.randn(n, generator=gen, dtype=torch.float64) * 10 ** (seed % 5 - 2)).to(dtype)
    noise = torch.randn(n, generator=gen, dtype=torch.float64) * 10 ** -(seed % 4 + 1)
    cand = (ref.double() * (1 + noise)).to(dtype)
    if seed % 3:  # NaN and infinities in either tensor, on both of the module's paths
        picks = torch.randperm(n, generator=gen)[:6].tolist()
        cand[picks[0]], ref[picks[1]] = float("nan"), float("nan")
        cand[picks[2]] = ref[picks[2]] = float("inf")
        cand[picks[3]], ref[picks[4]], cand[picks[5]] = -float("inf"), float("inf"), float("inf")
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    for atol_scale in (None, 0.01):
        expected = spec_compare(cand, ref, tol, atol_scale)
        for chunk in (n, 16, 7):  # the torch path (bfloat16) and the numpy one (the others)
            monkeypatch.setattr(correctness, "_CHUNK_HOST", chunk)
            monkeypatch.setattr(correctness, "_CHUNK_NUMPY", chunk)
            got = compare_tensor(cand, ref, tol, atol_scale)
            assert got[0] == expected[0], (chunk, atol_scale)
            assert got[1:] == pytest.approx(expected[1:], rel=1e-12), (chunk, atol_scale)


def test_the_comparison_leaves_float64_tensors_as_they_were():
    ref = torch.randn(1000, dtype=torch.float64)
    cand = ref + 1e-9
    before_c, before_r = cand.clone(), ref.clone()
    compare_tensor(cand, ref, TOL, 0.01)
    assert torch.equal(cand, before_c) and torch.equal(ref, before_r)  # the in-place passes work on copies


def test_degenerate_flags_on_outputs_larger_than_a_chunk(monkeypatch):
    monkeypatch.setattr(correctness, "_CHUNK_HOST", 64)
    monkeypatch.setattr(correctness, "_CHUNK_NUMPY", 64)
    cfg = SandboxConfig()
    healthy = [[torch.randn(1000)], [torch.randn(1000)]]
    assert degenerate_task_flags(healthy, cfg) == []
    late = torch.zeros(1000)
    late[-1] = 1.0  # zeros fail only in the last chunk
    assert degenerate_task_flags([[late], [late + 1e-3]], cfg) == []
    assert any("zeros" in f for f in degenerate_task_flags([[torch.full((1000,), 1e-7)]], cfg))
    const = torch.full((1000,), 3.0, dtype=torch.float16)
    assert any("constant (3)" in f for f in degenerate_task_flags([[const]], cfg))


def test_a_host_comparison_chunk_runs_each_op_on_the_calling_thread():
    # Chunks above ATen's grain size (32768 elements) open an OpenMP region per op; with several processes
    # comparing at once on the H200 host, those regions stalled one 256 MB comparison for over 150 s.
    import rubric_rl.sandbox.measure.correctness as correctness

    assert correctness._chunk_size(torch.empty(0)) <= 32768


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
def test_host_tensors_are_compared_with_numpy_and_give_the_torch_paths_results(monkeypatch, dtype):
    # numpy's loops release the GIL, so an evaluator comparing for several slots at once uses several cores
    # (torch's grain-sized ops held it between calls: four threads in one process compared no faster than one).
    gen = torch.Generator().manual_seed(7)
    n = 5000
    if dtype.is_floating_point:
        ref = torch.randn(n, generator=gen).to(dtype)
        cand = (ref.double() * (1 + 1e-3 * torch.randn(n, generator=gen, dtype=torch.float64))).to(dtype)
        cand[3], ref[9], cand[11] = float("nan"), float("inf"), -float("inf")
    else:
        ref = torch.randint(0, 2, (n,), generator=gen).to(dtype)
        cand = ref.clone()
        cand[:40] = ~cand[:40] if dtype == torch.bool else cand[:40] + 1
    used: list[str] = []
    real_as_numpy = correctness._as_numpy
    monkeypatch.setattr(correctness, "_as_numpy", lambda *a: used.append("numpy") or real_as_numpy(*a))
    monkeypatch.setattr(correctness, "_CHUNK_NUMPY", 999)
    got = compare_tensor(cand, ref, TOL, 0.01)
    assert used and real_as_numpy(cand, ref, correctness._NUMPY_REAL | correctness._NUMPY_EXACT) is not None
    monkeypatch.setattr(correctness, "_as_numpy", lambda *a: None)  # the torch path
    assert compare_tensor(cand, ref, TOL, 0.01) == pytest.approx(got, rel=1e-12)
    if not dtype.is_floating_point:
        assert got[0] == 40
