"""Attributing the GPU kernels of one candidate forward to the candidate or to a library.

A kernel is the candidate's when its (demangled) name contains the name of a ``__global__`` function of the
candidate's sources; a library's when it comes from cuBLAS/cuBLASLt/cuDNN/CUTLASS/cuFFT (by their naming);
otherwise it is ATen's own (elementwise, reduction, copy and fill kernels). The share of GPU time in the
candidate's own kernels goes into the Verdict, for the judge and for the policy's minimum.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from rubric_rl.sandbox.verdict import KernelLaunch

Owner = Literal["candidate", "library", "torch"]

_LIBRARY = re.compile(
    r"cublas|cutlass|xmma|gemm|gemv|cudnn|cufft|nvjet|sm\d{2}_|ampere_|hopper_|volta_|turing_|"
    r"magma|cusparse|cutensor|implicit_convolve|winograd|fft",
    re.IGNORECASE,
)
_NOT_KERNELS = re.compile(r"^(?:cuda\w+|Memcpy|Memset|\[memory\]|Activity Buffer)", re.IGNORECASE)


def kernel_owner(name: str, own: set[str]) -> Owner:
    """Whose kernel ``name`` is: the candidate's (it names one of ``own``, the candidate's ``__global__``
    functions), a library's, or else ATen's."""
    if any(re.search(rf"\b{re.escape(k)}\b", name) for k in own):
        return "candidate"
    if _LIBRARY.search(name):
        return "library"
    return "torch"


def side_streams(events: list[dict[str, Any]], current_stream: int) -> set[int]:
    """Streams other than the current one that the forward's kernels ran on (empty for honest candidates)."""
    return {
        int(e["stream"])
        for e in events
        if e.get("kind", "kernel") == "kernel" and int(e.get("stream", -1)) >= 0 and int(e["stream"]) != current_stream
    }


def attribute_kernels(events: list[dict[str, Any]], own_kernels: set[str]) -> tuple[list[KernelLaunch], float | None]:
    kernels: list[KernelLaunch] = []
    for e in events:
        name = str(e.get("name", ""))
        if not name or _NOT_KERNELS.match(name) or e.get("kind", "kernel") != "kernel":
            continue
        kernels.append(
            KernelLaunch(
                name=name,
                owner=kernel_owner(name, own_kernels),
                calls=int(e.get("calls", 0)),
                total_us=float(e.get("total_us", 0.0)),
            )
        )
    kernels.sort(key=lambda k: -k.total_us)
    total = sum(k.total_us for k in kernels)
    if total <= 0:
        return kernels, None
    own = sum(k.total_us for k in kernels if k.owner == "candidate")
    return kernels, own / total
