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

from rubric_rl.sandbox.run.messages import OutputInfo

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


def describe(value: Any) -> OutputInfo:
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


_FP_ROW = 4096  # words per row of the matrix a fingerprint sums by rows and by columns
_U64 = 2**64 - 1


def nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def fingerprint(values: list[Any]) -> list[str]:
    """A fingerprint of tensors' bits, computed on their device: any changed word changes its plain sum, any
    moved word its position-weighted sum (weight: position + 1, modulo 2**64). Tamper evidence for outputs kept
    in the worker, not a cryptographic hash (an adversary who could find and rewrite those tensors could also
    forge compensating changes).

    The weighted sum is taken without a temporary of the tensor's size: the words, as a matrix of ``_FP_ROW``
    columns, are summed by rows and by columns (two reads, each into an int64 vector), and
    ``sum((r * _FP_ROW + c + 1) * w[r, c]) == _FP_ROW * sum(r * row_r) + sum((c + 1) * col_c)``. It used to
    widen every chunk to int64 and multiply it by its positions, several writes and reads of the tensor's size
    per fingerprint, six fingerprints of each of KernelBench L1's 6 GB outputs and inputs per trial."""
    prints = []
    for v in values:
        if not isinstance(v, torch.Tensor) or not v.numel():
            prints.append(repr(v) if not isinstance(v, torch.Tensor) else "empty")
            continue
        raw = v.detach().contiguous().reshape(-1).view(torch.uint8)
        words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
        plain, weighted = _word_sums(words)
        prints.append(f"{v.dtype}:{list(v.shape)}:{plain:016x}:{weighted:016x}")
    return prints


def _word_sums(words: torch.Tensor) -> tuple[int, int]:
    """The plain and the position-weighted sum of a flat integer tensor, modulo 2**64 (see ``fingerprint``)."""
    rows_n = words.numel() // _FP_ROW
    matrix, tail = words[: rows_n * _FP_ROW].view(rows_n, _FP_ROW), words[rows_n * _FP_ROW :]
    row_sums, col_sums = matrix.sum(dim=1), matrix.sum(dim=0)  # int64: sum widens integers

    def positions(start: int, end: int) -> torch.Tensor:
        return torch.arange(start, end, device=words.device, dtype=torch.int64)

    row_plain, row_weighted, col_weighted, tail_plain, tail_weighted = torch.stack(
        [
            row_sums.sum(),
            (row_sums * positions(0, rows_n)).sum(),
            (col_sums * positions(1, _FP_ROW + 1)).sum(),
            tail.sum(),
            (tail.to(torch.int64) * positions(1, tail.numel() + 1)).sum(),
        ]
    ).tolist()
    plain = (row_plain + tail_plain) & _U64
    weighted = (_FP_ROW * row_weighted + col_weighted + rows_n * _FP_ROW * tail_plain + tail_weighted) & _U64
    return plain, weighted


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
