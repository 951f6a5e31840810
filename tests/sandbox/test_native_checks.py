import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build.extension import prepare_build, spec_from_call
from rubric_rl.sandbox.checks.native import check_native_sources, kernel_names

KERNEL = """
#include <cuda_runtime.h>
__global__ void __launch_bounds__(256) scale_kernel(const float* __restrict__ x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.f * x[i];  // fopen( in a comment is fine, "system(" in a string too
}
torch::Tensor scale(torch::Tensor x) {
    auto y = torch::empty_like(x);
    scale_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""


def findings(cuda: str, cpp: str = "torch::Tensor scale(torch::Tensor x);", **policy):
    cfg = SandboxConfig(backend="cuda", policy=policy, build={"split_sources": False})
    build = prepare_build(
        spec_from_call((), {"name": "e", "cpp_sources": cpp, "cuda_sources": cuda, "functions": ["scale"]}), cfg, "9.0"
    )
    return {f.rule: f for f in check_native_sources(build, None, cfg)}


def test_honest_kernel_is_clean():
    assert findings(KERNEL) == {}
    assert kernel_names([KERNEL]) == {"scale_kernel"}


def test_template_kernel_names():
    src = "template <typename T>\n__global__ void relu(T* x) {}\n__global__ void plain(float* y) {}\n"
    assert kernel_names([src]) == {"relu", "plain"}


@pytest.mark.parametrize(
    "extra, rule",
    [
        ('FILE* f = fopen("/etc/passwd", "r");', "native.os_access"),
        ('system("ls");', "native.os_access"),
        ("#include <unistd.h>", "native.os_headers"),
        ('#include "/etc/shadow"', "native.absolute_include"),
        ("std::thread t([]{});", "native.threads"),
        ("cudaStream_t s; cudaStreamCreate(&s);", "native.stream_creation"),
        ("auto s = at::cuda::getStreamFromPool();", "native.stream_creation"),
        ("c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::Python);", "native.dispatch_escape"),
        ("auto z = at::native::add(x, x);", "native.dispatch_escape"),
        ("auto z = torch::matmul(x, x);", "native.aten_compute"),
        ("auto z = x.matmul(x);", "native.aten_compute"),
        ("auto z = torch::nn::functional::relu(x);", "native.aten_compute"),
        ("cublasSgemm(h, a, b, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1);", "native.library_call"),
    ],
)
def test_rule_fires(extra, rule):
    found = findings(KERNEL + "\nvoid extra(torch::Tensor x) {\n" + extra + "\n}\n")
    assert rule in found, found
    assert found[rule].severity == "error"


def test_library_allowed_by_policy():
    src = KERNEL + "\nvoid g() { cublasSgemm(0); }\n"
    assert "native.library_call" in findings(src)
    assert "native.library_call" not in findings(src, allowed_libraries=["cublas"])


def test_no_kernel_in_cuda_sources():
    assert "native.no_kernel" in findings("torch::Tensor scale(torch::Tensor x) { return x; }")
