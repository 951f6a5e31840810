"""Comparing a candidate's outputs with the reference's: in the evaluator's process, or (outputs too large to
ship, see ``SandboxConfig.ship_outputs_max_mb``) on the device inside the worker, spot-checked by the evaluator.

Per output: the same structure, kind, shape and dtype; then values with ``|c - r| <= atol + rtol * |r|`` at the
tolerance of the output's dtype, computed in float64. NaN in the candidate never passes; infinities pass
only where the reference has the same infinity, and a finite value never passes against an infinity. Max
absolute and relative errors and the number of mismatched elements are recorded for every trial. Also here:
whether a task is degenerate (zeros, a constant, or one fixed answer would pass).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from rubric_rl.sandbox.config import SandboxConfig, Tolerance
from rubric_rl.sandbox.verdict import TrialResult

_TINY = 1e-12


def tolerance_for(dtype: torch.dtype, config: SandboxConfig) -> Tolerance:
    name = str(dtype).removeprefix("torch.")
    return config.correctness.tolerances.get(name, config.correctness.tolerances["float32"])


# Elements compared at a time. On the host a chunk's float64 temporaries stay inside the CPU's caches, so the
# dozen passes over a chunk run from cache instead of memory (6.1-6.7 s -> 0.13-0.86 s for 64M float32 elements on
# 2 cores); on a GPU a chunk keeps the temporaries near 128 MB whatever the output size.
# A host chunk is no larger than ATen's grain size (32768), so each op on it runs on the calling thread: larger
# chunks opened an OpenMP region per op, which spins and stalls when several processes compare at once (three
# gpu test processes on the H200 host spent over 150 s comparing one 256 MB output; on 2 cores, three processes
# of 8 threads took 11.7-13.4 s on a NaN candidate of 64M elements at 1 << 18, 3.0-3.3 s at 1 << 15).
_CHUNK = 1 << 24
_CHUNK_HOST = 1 << 15
# Host tensors of these dtypes are compared with numpy, whose elementwise loops run on the calling thread with
# the GIL released: an evaluator comparing for several slots at once compares on several cores. torch's ops on
# grain-sized chunks held the GIL between them (15 calls per 32768 elements): four threads in one process, each
# comparing 8M float32 elements, took 0.32 s each on 2 cores, one alone 0.073 s; with numpy 0.10 s and 0.032 s.
_NUMPY_REAL = frozenset({torch.float16, torch.float32, torch.float64})
_NUMPY_EXACT = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})
_CHUNK_NUMPY = 1 << 16


def _chunk_size(t: torch.Tensor) -> int:
    return _CHUNK_HOST if t.device.type == "cpu" else _CHUNK


def _as_numpy(cand: torch.Tensor, ref: torch.Tensor, dtypes: frozenset[torch.dtype]) -> tuple[Any, Any] | None:
    """Both flat host tensors as numpy arrays sharing their memory, when their dtype is one of ``dtypes``."""
    if cand.device.type != "cpu" or ref.device.type != "cpu" or cand.dtype != ref.dtype or ref.dtype not in dtypes:
        return None
    return tuple(t.detach().resolve_neg().resolve_conj().contiguous().numpy() for t in (cand, ref))  # type: ignore[return-value]


def compare_tensor(
    cand: torch.Tensor, ref: torch.Tensor, tol: Tolerance, atol_scale: float | None = None
) -> tuple[int, float, float]:
    """(mismatched elements, max abs error, max rel error) of two same-shape tensors, on their device.

    With ``atol_scale``, the absolute tolerance is at most ``atol_scale`` times the reference's RMS: an output
    whose values are all far below ``atol`` (where zeros or any constant would pass) must still be matched to
    within a small fraction of its own size. For outputs of ordinary size it changes nothing. Works in chunks,
    so a multi-GB output is compared without multi-GB temporaries.
    """
    c_all, r_all = cand.reshape(-1), ref.reshape(-1)
    n, chunk = r_all.numel(), _chunk_size(r_all)
    if not (ref.is_floating_point() or ref.is_complex()):
        exact = _as_numpy(c_all, r_all, _NUMPY_EXACT)
        if exact is not None:
            c_np, r_np = exact
            step = _CHUNK_NUMPY
            differing = sum(int(np.count_nonzero(c_np[i : i + step] != r_np[i : i + step])) for i in range(0, n, step))
        else:
            differing = sum(int((c_all[i : i + chunk] != r_all[i : i + chunk]).sum()) for i in range(0, n, chunk))
        return differing, float(differing > 0), float(differing > 0)
    if not n:
        return 0, 0.0, 0.0
    real = _as_numpy(c_all, r_all, _NUMPY_REAL)
    atol = tol.atol
    if atol_scale is not None:
        rms = _finite_rms_numpy(real[1]) if real is not None else _finite_rms(r_all, chunk)
        atol = min(atol, atol_scale * rms) if rms > 0 else atol
    if real is not None:
        with np.errstate(all="ignore"):  # inf - inf and the like: handled as the torch path handles them
            return _compare_finite_numpy(*real, atol, tol.rtol) or _compare_general_numpy(*real, atol, tol.rtol)
    if not ref.is_complex():
        finite = _compare_finite(c_all, r_all, atol, tol.rtol, chunk)
        if finite is not None:
            return finite
    return _compare_general(c_all, r_all, atol, tol.rtol, chunk)


def _finite_rms_numpy(r_all: Any) -> float:
    """``_finite_rms`` of a real numpy array."""
    n, step = r_all.size, _CHUNK_NUMPY
    with np.errstate(all="ignore"):
        squares = math.fsum(float(np.square(r_all[i : i + step], dtype=np.float64).sum()) for i in range(0, n, step))
        if math.isfinite(squares):
            return (squares / n) ** 0.5
        total, count = 0.0, 0
        for i in range(0, n, step):
            a = np.abs(r_all[i : i + step].astype(np.float64))
            a = a[np.isfinite(a)]
            total += float(np.square(a).sum())
            count += a.size
    return (total / count) ** 0.5 if count else 0.0


def _compare_finite_numpy(c_all: Any, r_all: Any, atol: float, rtol: float) -> tuple[int, float, float] | None:
    """``_compare_finite`` on numpy arrays (the same float64 arithmetic, in place on each chunk's copies)."""
    bad, max_abs, max_rel = 0, -math.inf, -math.inf
    for i in range(0, r_all.size, _CHUNK_NUMPY):
        c = c_all[i : i + _CHUNK_NUMPY].astype(np.float64)
        r = r_all[i : i + _CHUNK_NUMPY].astype(np.float64)
        err = np.abs(np.subtract(c, r, out=c), out=c)
        top = float(err.max())
        if not math.isfinite(top):  # a NaN or an infinity somewhere: the general comparison says what
            return None
        max_abs = max(max_abs, top)
        ref_abs = np.abs(r, out=r)
        limit = ref_abs * rtol
        limit += atol
        bad += int(np.count_nonzero(err > limit))
        max_rel = max(max_rel, float(np.divide(err, np.maximum(ref_abs, _TINY, out=ref_abs), out=err).max()))
    return bad, max_abs, max_rel


def _compare_general_numpy(c_all: Any, r_all: Any, atol: float, rtol: float) -> tuple[int, float, float]:
    """``_compare_general`` on real numpy arrays."""
    total_bad, max_abs, max_rel = 0, 0.0, 0.0
    for i in range(0, r_all.size, _CHUNK_NUMPY):
        c = c_all[i : i + _CHUNK_NUMPY].astype(np.float64)
        r = r_all[i : i + _CHUNK_NUMPY].astype(np.float64)
        both_inf_same = np.isinf(c) & np.isinf(r) & (c == r)
        err = np.abs(c - r)
        err[both_inf_same] = 0.0
        ref_abs = np.abs(r)
        bad = np.isnan(err) | (err > atol + rtol * ref_abs)
        bad |= np.isnan(c) | ((np.isinf(c) | np.isinf(r)) & ~both_inf_same)
        finite = np.isfinite(err)
        total_bad += int(np.count_nonzero(bad))
        max_abs = max(max_abs, float(np.where(finite, err, np.inf).max()))
        max_rel = max(max_rel, float(np.where(finite, err / np.maximum(ref_abs, _TINY), np.inf).max()))
    return total_bad, max_abs, max_rel


def _finite_rms(r_all: torch.Tensor, chunk: int) -> float:
    """The RMS of the reference's finite values (0.0 when it has none)."""
    n = r_all.numel()
    if not r_all.is_complex():
        sums = [r_all[i : i + chunk].to(torch.float64).square().sum() for i in range(0, n, chunk)]
        squares = float(torch.stack(sums).sum())
        if math.isfinite(squares):  # every value finite: no need to pick them out
            return (squares / n) ** 0.5
    total, count = 0.0, 0
    for i in range(0, n, chunk):
        a = r_all[i : i + chunk].to(torch.complex128 if r_all.is_complex() else torch.float64).abs()
        a = a[torch.isfinite(a)]
        total += float(a.pow(2).sum())
        count += a.numel()
    return (total / count) ** 0.5 if count else 0.0


def _compare_finite(
    c_all: torch.Tensor, r_all: torch.Tensor, atol: float, rtol: float, chunk: int
) -> tuple[int, float, float] | None:
    """The comparison of real tensors whose values are all finite, in place on float64 copies of each chunk
    (a third of the passes of the general one); None when the errors show a non-finite value. Same
    arithmetic as ``_compare_general``, so the same results."""
    bad, max_abs, max_rel = [], [], []
    for i in range(0, r_all.numel(), chunk):
        c = c_all[i : i + chunk].to(torch.float64, copy=True)
        r = r_all[i : i + chunk].to(torch.float64, copy=True)
        err = c.sub_(r).abs_()  # finite everywhere exactly when both chunks are
        max_abs.append(err.max())
        ref_abs = r.abs_()
        bad.append((err > ref_abs.mul(rtol).add_(atol)).sum())
        max_rel.append(err.div_(ref_abs.clamp_min_(_TINY)).max())
    top = float(torch.stack(max_abs).max())  # max propagates NaN
    if not math.isfinite(top):
        return None
    return int(torch.stack(bad).sum()), top, float(torch.stack(max_rel).max())


def _compare_general(
    c_all: torch.Tensor, r_all: torch.Tensor, atol: float, rtol: float, chunk: int
) -> tuple[int, float, float]:
    """Any values: NaN in the candidate never passes, an infinity passes only against the same infinity, and
    a finite value never passes against an infinity. A non-finite error makes the max errors infinite."""
    wide = torch.complex128 if r_all.is_complex() else torch.float64
    total_bad, max_abs, max_rel = 0, 0.0, 0.0
    for i in range(0, r_all.numel(), chunk):
        c = c_all[i : i + chunk].to(wide)
        r = r_all[i : i + chunk].to(wide)
        both_inf_same = torch.isinf(c) & torch.isinf(r) & (c == r)
        err = (c - r).abs()
        err = torch.where(both_inf_same, torch.zeros_like(err), err)
        bad = torch.isnan(err) | (err > atol + rtol * r.abs())
        bad |= torch.isnan(c) | ((torch.isinf(c) | torch.isinf(r)) & ~both_inf_same)
        finite = torch.isfinite(err)
        inf = torch.full_like(err, float("inf"))
        total_bad += int(bad.sum())
        max_abs = max(max_abs, float(torch.where(finite, err, inf).max()))
        max_rel = max(max_rel, float(torch.where(finite, err / r.abs().clamp_min(_TINY), inf).max()))
    return total_bad, max_abs, max_rel


def compare_outputs(
    cand_meta: Sequence[Mapping[str, Any]],
    cand_values: list[Any],
    ref_meta: Sequence[Mapping[str, Any]],
    ref_values: list[Any],
    config: SandboxConfig,
    *,
    index: int,
    distribution: str,
    seed: int,
) -> TrialResult:
    """One trial's result; every way of being wrong gets a specific message."""

    def fail(msg: str, **kw: Any) -> TrialResult:
        return TrialResult(index=index, distribution=distribution, seed=seed, passed=False, error=msg, **kw)

    if len(cand_meta) != len(ref_meta):
        return fail(f"returned {len(cand_meta)} output(s), the reference returns {len(ref_meta)}")
    total_bad, numel, max_abs, max_rel = 0, 0, 0.0, 0.0
    for i, (cm, rm) in enumerate(zip(cand_meta, ref_meta, strict=True)):
        label = f"output {i}" if len(ref_meta) > 1 else "the output"
        if rm["kind"] == "tensor":
            if cm["kind"] != "tensor":
                return fail(f"{label} is a {cm.get('type', cm['kind'])}, the reference returns a tensor")
            if not cm["plain"]:
                return fail(f"{label} is a {cm['type']}, not a plain torch.Tensor")
            if cm["layout"] != "torch.strided":
                return fail(f"{label} has layout {cm['layout']}, expected torch.strided")
            if cm["device"] != rm["device"]:
                return fail(f"{label} is on {cm['device']}, the reference's is on {rm['device']}")
            if cm["shape"] != rm["shape"]:
                return fail(f"{label} has shape {tuple(cm['shape'])}, expected {tuple(rm['shape'])}")
            if cm["dtype"] != rm["dtype"]:
                return fail(f"{label} has dtype {cm['dtype']}, expected {rm['dtype']}")
            c, r = cand_values[i], ref_values[i]
            if not isinstance(c, torch.Tensor) or not isinstance(r, torch.Tensor):
                return fail(f"{label} could not be read back")
            bad, a, rel = compare_tensor(c, r, tolerance_for(r.dtype, config), config.correctness.atol_scale)
            total_bad += bad
            numel += r.numel()
            max_abs, max_rel = max(max_abs, a), max(max_rel, rel)
        elif rm["kind"] == "scalar":
            if cm["kind"] != "scalar" or cm["value"] != rm["value"]:
                return fail(f"{label} is {cm.get('value', cm['kind'])!r}, expected {rm['value']!r}")
    passed = total_bad == 0
    return TrialResult(
        index=index,
        distribution=distribution,
        seed=seed,
        passed=passed,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        mismatched=total_bad,
        numel=numel,
        error=None if passed else f"{total_bad} of {numel} elements outside tolerance (max abs error {max_abs:.3g})",
    )


def compare_host_outputs(
    cand: list[Any], ref: list[Any], config: SandboxConfig, *, index: int, distribution: str, seed: int
) -> TrialResult:
    """Compare two lists of CPU tensors (None where a value could not be read back)."""
    meta = [_meta_of(v) for v in ref]
    cand_meta = [_meta_of(v) if v is not None else {"kind": "other", "type": "unreadable"} for v in cand]
    return compare_outputs(cand_meta, cand, meta, ref, config, index=index, distribution=distribution, seed=seed)


def _meta_of(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {
            "kind": "tensor",
            "type": "torch.Tensor",
            "plain": True,
            "shape": list(value.shape),
            "dtype": str(value.dtype),
            "device": "host",
            "layout": str(value.layout),
        }
    return {"kind": "scalar", "value": value}


def degenerate_task_flags(trials: list[list[Any]], config: SandboxConfig) -> list[str]:
    """Why a task's correctness check would be weak: zeros or a constant pass, or outputs ignore the inputs."""
    flags: list[str] = []
    tensors_per_trial = [
        [v for v in outs if isinstance(v, torch.Tensor) and v.is_floating_point()] for outs in trials if outs
    ]
    if not tensors_per_trial or not tensors_per_trial[0]:
        return flags
    first = tensors_per_trial[0]
    for i, r in enumerate(first):
        if r.numel() == 0:
            continue
        tol = tolerance_for(r.dtype, config)
        if not torch.isfinite(r).all():
            flags.append(f"output {i}: the reference produces non-finite values")
            continue
        flat = r.reshape(-1)
        if _within_tolerance(0.0, flat, tol):
            flags.append(f"degenerate: output {i} is within tolerance of zeros")
            continue
        # A constant c passes only if it is near both extremes: max - min <= 2 atol + rtol (|max| + |min|).
        # Where the values spread wider than that (a margin covers the rounding here), no constant passes.
        low, high = (float(v) for v in torch.aminmax(flat))
        if high - low > (2 * tol.atol + tol.rtol * (abs(high) + abs(low))) * (1 + 1e-6):
            continue
        # One of the output's own values, so exact in its dtype (median is not defined for every dtype).
        median = float((flat if flat.dtype in (torch.float32, torch.float64) else flat.float()).median())
        if _within_tolerance(median, flat, tol):
            flags.append(f"degenerate: output {i} is within tolerance of a constant ({median:.4g})")
    if len(tensors_per_trial) > 1 and all(
        len(t) == len(first) and all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(t, first, strict=True))
        for t in tensors_per_trial[1:]
    ):
        flags.append("degenerate: the reference returns the same outputs for different inputs")
    return flags


def _within_tolerance(value: float, ref: torch.Tensor, tol: Tolerance) -> bool:
    """Whether the constant ``value`` everywhere would pass against the flat ``ref``; stops at the first chunk
    where it fails (for a real output, the first), and never materialises the constant beyond a chunk."""
    constant = torch.full((), value, dtype=ref.dtype, device=ref.device).expand(ref.numel())
    chunk = _chunk_size(ref)
    return all(
        compare_tensor(constant[i : i + chunk], ref[i : i + chunk], tol)[0] == 0 for i in range(0, ref.numel(), chunk)
    )
