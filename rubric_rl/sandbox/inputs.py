"""Inputs and outputs of reference and candidate models inside the worker.

Inputs come from the task's own ``get_inputs()``, seeded, created on the evaluation device; extra
distributions redraw every floating tensor (signed normal, heavy-tailed Student-t) with its shape and dtype,
so identity kernels on ``torch.rand`` inputs and answers from known input statistics fail. Outputs are
flattened to a list so that tuples, lists and single tensors compare the same way. Outputs too large to
ship are fingerprinted and sampled where they are.
"""

from __future__ import annotations

from typing import Any

import torch

HEAVY_TAIL_DF = 2.5


def make_inputs(module: Any, *, seed: int, device: str, distribution: str, backend_seed: Any) -> list[Any]:
    backend_seed(seed)
    with torch.device(device):
        values = list(module.get_inputs())
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            v = v.to(device)
            if distribution != "task" and v.is_floating_point():
                v = redraw(v, distribution)
        out.append(v)
    return out


_REDRAW_CHUNK = 1 << 24


def redraw(t: torch.Tensor, distribution: str) -> torch.Tensor:
    if distribution == "signed":
        return torch.randn_like(t)
    if distribution == "heavy_tailed":
        # Sampled a chunk at a time: Student-t's sampler makes several float32 temporaries of its sample's size,
        # 30 GB for KernelBench L1-19's 6 GB input, beside the trials' outputs kept on the device.
        df = torch.tensor(HEAVY_TAIL_DF, device=t.device)
        student = torch.distributions.StudentT(df)
        out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
        flat = out.view(-1)
        for i in range(0, flat.numel(), _REDRAW_CHUNK):
            n = min(_REDRAW_CHUNK, flat.numel() - i)
            flat[i : i + n] = student.sample((n,))
        return out
    raise ValueError(f"unknown input distribution {distribution!r}")


def clone_inputs(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def same_bits(a: list[Any], b: list[Any]) -> bool:
    """Bitwise equality (NaN-safe) of two input lists: did the callee write into its inputs?"""
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            xb = x.detach().contiguous().view(-1).view(torch.uint8) if x.numel() else x
            yb = y.detach().contiguous().view(-1).view(torch.uint8) if y.numel() else y
            if x.numel() and not bool((xb == yb).all()):
                return False
    return True


def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        flat: list[Any] = []
        for item in out:
            flat.extend(flatten_outputs(item))
        return flat
    return [out]


def describe(value: Any) -> dict[str, Any]:
    """Metadata the evaluator checks before it compares values."""
    if isinstance(value, torch.Tensor):
        return {
            "kind": "tensor",
            "type": f"{type(value).__module__}.{type(value).__qualname__}",
            "plain": type(value) is torch.Tensor,
            "shape": list(value.shape),
            "dtype": str(value.dtype),
            "device": str(value.device),
            "layout": str(value.layout),
        }
    if isinstance(value, (bool, int, float)) or value is None:
        return {"kind": "scalar", "value": value}
    return {"kind": "other", "type": type(value).__qualname__}


def to_host(value: Any) -> Any:
    """A private CPU copy of a plain tensor (never shares storage with the worker's tensors)."""
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor and value.layout == torch.strided:
        return value.detach().to("cpu", copy=True).contiguous()
    return None


def poison(values: list[Any]) -> None:
    """Overwrite outputs before they are freed, so nothing later finds them in recycled memory."""
    for v in values:
        if isinstance(v, torch.Tensor) and type(v) is torch.Tensor and v.layout == torch.strided and v.numel():
            if v.is_floating_point() or v.is_complex():
                v.detach().fill_(float("nan"))
            else:
                v.detach().fill_(-1 if v.dtype != torch.bool else False)


def storage_spans(values: list[Any]) -> list[tuple[int, int]]:
    spans = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.layout == torch.strided:
            try:
                s = v.untyped_storage()
            except (RuntimeError, NotImplementedError):
                continue
            if s.nbytes():
                spans.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return spans


def aliases(value: Any, spans: list[tuple[int, int]]) -> bool:
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
        return False
    try:
        s = value.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return False
    lo, hi = s.data_ptr(), s.data_ptr() + s.nbytes()
    return any(lo < b and a < hi for a, b in spans)


_FP_CHUNK = 1 << 24


def nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def fingerprint(values: list[Any]) -> list[str]:
    """A fingerprint of tensors' bits, computed on their device: any changed word changes its plain sum, any
    moved word its position-weighted sum. Tamper evidence for outputs kept in the worker, not a cryptographic
    hash (an adversary who could find and rewrite those tensors could also forge compensating changes)."""
    prints = []
    for v in values:
        if not isinstance(v, torch.Tensor) or not v.numel():
            prints.append(repr(v) if not isinstance(v, torch.Tensor) else "empty")
            continue
        raw = v.detach().contiguous().reshape(-1).view(torch.uint8)
        words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
        plain, weighted = 0, 0
        for i in range(0, words.numel(), _FP_CHUNK):
            w = words[i : i + _FP_CHUNK].to(torch.int64)
            pos = torch.arange(i, i + w.numel(), device=w.device, dtype=torch.int64) % 1_000_003 + 1
            plain = (plain + int(w.sum())) & (2**64 - 1)
            weighted = (weighted + int((w * pos).sum())) & (2**64 - 1)
        prints.append(f"{v.dtype}:{list(v.shape)}:{plain:016x}:{weighted:016x}")
    return prints


def sample_pairs(cand: list[Any], ref: list[Any], seed: int, k: int) -> tuple[list[Any], list[Any]]:
    """Host copies of both outputs at up to ``k`` positions per tensor drawn from ``seed`` (None where the
    pair cannot be sampled: not two same-shape tensors)."""
    gen = torch.Generator().manual_seed(seed)
    cs: list[Any] = []
    rs: list[Any] = []
    for c, r in zip(cand, ref, strict=False):
        if not (isinstance(c, torch.Tensor) and isinstance(r, torch.Tensor)) or c.shape != r.shape or not r.numel():
            cs.append(None)
            rs.append(None)
            continue
        idx = torch.randint(0, r.numel(), (min(k, r.numel()),), generator=gen).to(r.device)
        cs.append(c.detach().reshape(-1)[idx].to("cpu", copy=True))
        rs.append(r.detach().reshape(-1)[idx].to("cpu", copy=True))
    return cs, rs


def subsample(value: Any, k: int = 1 << 22) -> Any:
    """A strided subsample of a large tensor (for the advisory degenerate-task checks on kept outputs)."""
    if isinstance(value, torch.Tensor) and value.numel() > k:
        flat = value.detach().reshape(-1)
        return flat[:: -(-flat.numel() // k)].clone()
    return value
