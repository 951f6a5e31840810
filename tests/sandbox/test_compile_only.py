"""The compile-only check of CUDA candidates on a machine without a GPU: nvcc and g++ compile the objects; nothing
is linked or run. Needs nvcc (the CUDA toolkit), not a CUDA build of torch."""

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.build.builder import Builder
from rubric_rl.sandbox.build.extension import ExtensionSpec, prepare_build

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")

KERNEL = r"""
#include <torch/extension.h>
__global__ void scale_kernel(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}
torch::Tensor scale_cuda(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    return y;
}
"""

CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""{kernel}"""

ext = load_inline(
    name="{name}",
    cpp_sources="torch::Tensor scale_cuda(torch::Tensor x, double s);",
    cuda_sources=cuda_source,
    functions=["scale_cuda"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale_cuda(x, 2.0)
'''


def candidate(name: str, kernel: str = KERNEL) -> str:
    return CANDIDATE.format(kernel=kernel, name=name)


def test_a_cuda_candidate_that_compiles_passes_without_a_gpu(build_cache: Path):
    report = Evaluator(SandboxConfig(backend="cuda", build={"cache_dir": build_cache})).check_compiles(
        candidate("scale_ok")
    )
    assert report.ok, report.errors
    assert not report.hack and report.errors == []
    (build,) = report.builds
    assert build.ok and build.split_sources  # the torch wrapper moved out of the .cu, as on the GPU machine


def test_a_kernel_that_does_not_compile_fails_at_its_line_in_the_candidate(build_cache: Path):
    broken = KERNEL.replace("y[i] = x[i] * s;", "y[i] = x[i] * t;")
    program = candidate("scale_broken", broken)
    report = Evaluator(SandboxConfig(backend="cuda", build={"cache_dir": build_cache})).check_compiles(program)
    assert not report.ok and not report.hack
    line = next(i for i, text in enumerate(program.splitlines(), 1) if "x[i] * t" in text)
    assert any(f"candidate line {line}" in e and '"t"' in e for e in report.errors), report.errors


def _scale_build(name: str, cache: Path):
    spec = ExtensionSpec(
        name=name,
        cpp_sources=["torch::Tensor scale_cuda(torch::Tensor x, double s);"],
        cuda_sources=[KERNEL],
        functions=["scale_cuda"],
    )
    prepared = prepare_build(spec, SandboxConfig(backend="cuda", build={"cache_dir": cache}), "9.0")
    assert prepared.split_sources
    return prepared


def test_the_build_that_makes_the_pch_compiles_its_kernels_meanwhile_and_no_other_waits_for_it(tmp_path: Path):
    # On a cold cache the first build makes the precompiled torch header (about 25 s on one core): its kernels,
    # which do not include it, compile meanwhile instead of after.
    cache = tmp_path / "cache"
    outcome = Builder(cache).build(_scale_build("scale_pch", cache), mode="objects")
    assert outcome.ok, outcome.digest or outcome.infra_error
    (gch,) = (cache / "pch").glob("*/torch/extension.h.gch")
    (kernel_object,) = cache.rglob("*.cuda.o")
    (glue_object,) = cache.rglob("main.o")
    assert kernel_object.stat().st_mtime < gch.stat().st_mtime < glue_object.stat().st_mtime

    # Another build while one makes the PCH (its lock held here): it reads the real headers instead of waiting.
    # Every build of an H100 host's first wave used to wait for it: 54-56 s each, against 8-13 s after it.
    other = tmp_path / "other"
    (other / "pch").mkdir(parents=True)
    fd = os.open(other / "pch" / f"{gch.parent.parent.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        outcome = Builder(other, timeout_s=180).build(_scale_build("scale_no_wait", other), mode="objects")
        assert outcome.ok, outcome.digest or outcome.infra_error
        assert not list((other / "pch").glob("*/torch/extension.h.gch"))  # nobody made it: the lock was held
    finally:
        os.close(fd)
