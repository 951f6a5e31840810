"""Comparing a candidate's outputs with the reference's: in the evaluator's process, or (outputs too large to
ship, see ``SandboxConfig.ship_outputs_max_mb``) on the device inside the worker, spot-checked by the evaluator.

Per output: the same structure, kind, shape and dtype; then values with ``|c - r| <= atol + rtol * |r|`` at the
tolerance of the output's dtype, computed in float64. NaN in the candidate never passes; infinities pass
only where the reference has the same infinity. Max absolute and relative errors and the number of
mismatched elements are recorded for every trial. Also here: whether a task is degenerate (zeros, a constant,
or one fixed answer would pass).
"""

from __future__ import annotations

from typing import Any

import torch

from rubric_rl.sandbox.config import SandboxConfig, Tolerance
from rubric_rl.sandbox.verdict import TrialResult

_TINY = 1e-12


def tolerance_for(dtype: torch.dtype, config: SandboxConfig) -> Tolerance:
    name = str(dtype).removeprefix("torch.")
    return config.tolerances.get(name, config.tolerances["float32"])


_CHUNK = 1 << 24  # elements compared at a time: float64 temporaries stay near 128 MB whatever the output size


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
    n = r_all.numel()
    if not (ref.is_floating_point() or ref.is_complex()):
        differing = sum(int((c_all[i : i + _CHUNK] != r_all[i : i + _CHUNK]).sum()) for i in range(0, n, _CHUNK))
        return differing, float(differing > 0), float(differing > 0)
    wide = torch.complex128 if ref.is_complex() else torch.float64
    atol = tol.atol
    if atol_scale is not None and n:
        squares, count = 0.0, 0
        for i in range(0, n, _CHUNK):
            a = r_all[i : i + _CHUNK].to(wide).abs()
            a = a[torch.isfinite(a)]
            squares += float(a.pow(2).sum())
            count += a.numel()
        if count:
            rms = (squares / count) ** 0.5
            atol = min(atol, atol_scale * rms) if rms > 0 else atol
    total_bad, max_abs, max_rel = 0, 0.0, 0.0
    for i in range(0, n, _CHUNK):
        c = c_all[i : i + _CHUNK].to(wide)
        r = r_all[i : i + _CHUNK].to(wide)
        both_inf_same = torch.isinf(c) & torch.isinf(r) & (c == r)
        err = (c - r).abs()
        err = torch.where(both_inf_same, torch.zeros_like(err), err)
        bad = torch.isnan(err) | (err > atol + tol.rtol * r.abs())
        bad |= torch.isnan(c) | (torch.isinf(c) & ~both_inf_same)
        finite_err = torch.where(torch.isfinite(err), err, torch.full_like(err, float("inf")))
        total_bad += int(bad.sum())
        max_abs = max(max_abs, float(finite_err.max()))
        max_rel = max(max_rel, float((finite_err / r.abs().clamp_min(_TINY)).max()))
    return total_bad, max_abs, max_rel


def compare_outputs(
    cand_meta: list[dict[str, Any]],
    cand_values: list[Any],
    ref_meta: list[dict[str, Any]],
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
            bad, a, rel = compare_tensor(c, r, tolerance_for(r.dtype, config), config.atol_scale)
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
        r64 = r.to(torch.float64)
        if not torch.isfinite(r64).all():
            flags.append(f"output {i}: the reference produces non-finite values")
            continue
        if compare_tensor(torch.zeros_like(r64), r64, tol)[0] == 0:
            flags.append(f"degenerate: output {i} is within tolerance of zeros")
            continue
        const = torch.full_like(r64, float(r64.median()))
        if compare_tensor(const, r64, tol)[0] == 0:
            flags.append(f"degenerate: output {i} is within tolerance of a constant ({float(r64.median()):.4g})")
    if len(tensors_per_trial) > 1 and all(
        len(t) == len(first) and all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(t, first, strict=True))
        for t in tensors_per_trial[1:]
    ):
        flags.append("degenerate: the reference returns the same outputs for different inputs")
    return flags
