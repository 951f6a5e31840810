import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build.extension import SpecError, prepare_build, spec_from_call


def spec(**kw):
    base = {"name": "ext", "cpp_sources": "int f();", "functions": ["f"]}
    base.update(kw)
    return spec_from_call((), base)


def test_positional_and_keyword_arguments():
    s = spec_from_call(("ext", "cpp", "cu"), {"functions": "f", "extra_cuda_cflags": ["-O2"]})
    assert (s.name, s.cpp_sources, s.cuda_sources, s.functions) == ("ext", ["cpp"], ["cu"], ["f"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "bad name"}, "valid identifier"),
        ({"cpp_sources": 3}, "cpp_sources must be a string"),
        ({"functions": 5}, "functions must be"),
        ({"sycl_sources": "x"}, "sycl_sources are not supported"),
        ({"bogus": 1}, "unexpected keyword"),
    ],
)
def test_bad_calls(kwargs, message):
    with pytest.raises(SpecError, match=message):
        spec(**kwargs)


def test_evaluator_owns_flags():
    cfg = SandboxConfig(backend="cuda", build={"split_sources": False})
    s = spec(
        cuda_sources="__global__ void k(){}",
        extra_cuda_cflags=["-O0", "-arch=sm_80", "--use_fast_math", "-Xptxas", "-v", "-I/etc"],
        extra_ldflags=["-lcublas", "-lcuda"],
        extra_include_paths=["/home/secret"],
    )
    b = prepare_build(s, cfg, "9.0")
    assert b.cuda_cflags == ["-O3", "--use_fast_math", "-Xptxas=-v"]
    assert b.ldflags == ["-lcublas", "-lcuda"]  # linking is allowed; calling cuBLAS is policed elsewhere
    assert set(b.dropped_flags) == {"-O0", "-arch=sm_80", "-I/etc", "include path /home/secret"}
    assert b.arch_list == "9.0"
    s2 = spec(extra_ldflags=["-L/tmp/evil", "-Wl,-rpath,/tmp"])
    assert set(prepare_build(s2, SandboxConfig(backend="cpu"), None).dropped_flags) == {
        "-L/tmp/evil",
        "-Wl,-rpath,/tmp",
    }


def test_cpu_backend_rejects_cuda_sources():
    with pytest.raises(SpecError, match="cannot be built for the cpu backend"):
        prepare_build(spec(cuda_sources="__global__ void k(){}"), SandboxConfig(backend="cpu"), None)
    b = prepare_build(spec(extra_cflags=["-fopenmp", "-march=native"]), SandboxConfig(backend="cpu"), None)
    assert b.cflags == ["-O3", "-fopenmp"] and b.dropped_flags == ["-march=native"] and b.arch_list is None


def test_is_python_module_false_is_refused():
    with pytest.raises(SpecError, match="is_python_module=False"):
        prepare_build(spec(is_python_module=False), SandboxConfig(backend="cpu"), None)


SPLITTABLE = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def test_split_glue_is_built_at_its_own_level_and_the_kernels_at_o3():
    s = spec(cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);", cuda_sources=SPLITTABLE, functions=["relu_cuda"])
    split = prepare_build(s, SandboxConfig(backend="cuda"), "9.0")
    assert split.split_sources and split.cflags == ["-O1"] and split.cuda_cflags == ["-O3"]
    # Unsplit, the .cpp may hold whatever the candidate wrote: the evaluator's -O3.
    whole = prepare_build(s, SandboxConfig(backend="cuda"), "9.0", split_sources=False)
    assert not whole.split_sources and whole.cflags == ["-O3"]
    assert prepare_build(spec(), SandboxConfig(backend="cpu"), None).cflags == ["-O3", "-fopenmp"]
