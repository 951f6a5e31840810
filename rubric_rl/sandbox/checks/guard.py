"""Runtime guard: every ATen op the candidate's forward causes, from Python or from its C++.

A ``TorchDispatchMode`` sees each op that goes through the dispatcher on the calling thread, whether issued by
Python code or by ``at::``/``torch::`` calls inside the extension. Ops outside the allowlist (allocation,
views, shape and layout, copies needed for contiguity) are PyTorch doing the candidate's work: the evaluator
turns them into ``runtime.aten_fallback`` findings. The guard also checks that it is still in charge after the
call (a candidate that pops or disables dispatch modes is caught), and that a forward which returned tensors
caused at least one op (outputs must be allocated somewhere; none at all means the dispatcher was bypassed
or the result was made ahead of time).

What it does not see: ATen called from threads the candidate starts itself (the native checks forbid
threads and ATen compute in C++), and libraries called directly (cuBLAS); the kernel profile covers those.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

# Ops that create, view, reshape or copy memory without computing anything from the data.
ALLOWED_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "empty_permuted",
        "zeros",
        "zeros_like",
        "new_zeros",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "zero_",
        "fill_",
        "arange",
        "scalar_tensor",
        "lift_fresh",
        "lift_fresh_copy",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "view_as",
        "as_strided",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "flatten",
        "unflatten",
        "movedim",
        "slice",
        "select",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "alias",
        "detach",
        "diagonal",
        "unfold",
        "clone",
        "contiguous",
        "copy_",
        "_to_copy",
        "to",
        "resize_",
        "_local_scalar_dense",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
    }
)

_LOWER_PRECISION = {torch.float16, torch.bfloat16}
if hasattr(torch, "float8_e4m3fn"):
    _LOWER_PRECISION |= {torch.float8_e4m3fn, torch.float8_e5m2}


class AtenRecorder(TorchDispatchMode):
    """Counts every ATen op dispatched while active; notes dtype-lowering copies."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.downcasts: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = func._schema.name.split("::", 1)[-1]
        self.counts[name] += 1
        if name in ("_to_copy", "to") and args and isinstance(args[0], torch.Tensor):
            dtype = kwargs.get("dtype")
            if dtype in _LOWER_PRECISION and args[0].dtype in (torch.float32, torch.float64):
                self.downcasts[f"{args[0].dtype}->{dtype}"] += 1
        return func(*args, **kwargs)


class GuardedCall:
    """Runs one call under the recorder and reports whether the guard stayed in place."""

    def __init__(self) -> None:
        self.recorder = AtenRecorder()
        self.escaped: str | None = None

    def __call__(self, fn: Any, *args: Any) -> Any:
        depth = torch._C._len_torch_dispatch_stack()
        with self.recorder:
            out = fn(*args)
            if _get_current_dispatch_mode() is not self.recorder:
                self.escaped = "the dispatch-mode stack was changed during the forward"
        if torch._C._len_torch_dispatch_stack() != depth:
            self.escaped = self.escaped or "dispatch modes were pushed or popped and not restored"
        return out


def forbidden_ops(counts: dict[str, int], extra_allowed: list[str]) -> dict[str, int]:
    """Ops outside the allowlist (plus the policy's extra ops)."""
    allowed = ALLOWED_OPS | set(extra_allowed)
    return {op: n for op, n in sorted(counts.items()) if op not in allowed}
