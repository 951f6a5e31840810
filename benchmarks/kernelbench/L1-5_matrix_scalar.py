"""KernelBench L1-5: A * s for a Python float s. Elementwise float4 kernel (+ scalar tail)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor scale_forward(torch::Tensor A, double s);
"""

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>

// Host-side: raise a Python error if the preceding kernel launch failed.
static void kb_check_launch() {
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "CUDA kernel launch failed: ", cudaGetErrorString(err));
}

__global__ void scale_vec4_kernel(const float* __restrict__ a, float* __restrict__ y, long long n4, float s) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    float4* y4 = reinterpret_cast<float4*>(y);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = a4[i];
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        y4[i] = v;
    }
}

__global__ void scale_scalar_kernel(const float* __restrict__ a, float* __restrict__ y, long long start, long long n, float s) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = a[i] * s;
}

torch::Tensor scale_forward(torch::Tensor A, double s) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    torch::Tensor Ac = A.contiguous();
    torch::Tensor y = torch::empty_like(Ac);
    const long long n = Ac.numel();
    if (n == 0) return y;
    const float sf = static_cast<float>(s);
    const float* pa = Ac.data_ptr<float>();
    float* py = y.data_ptr<float>();
    long long done = 0;
    if (((reinterpret_cast<uintptr_t>(pa) | reinterpret_cast<uintptr_t>(py)) & 15) == 0 && n >= 4) {
        const long long n4 = n / 4;
        long long blocks = (n4 + 255) / 256;
        if (blocks > 1048576) blocks = 1048576;
        scale_vec4_kernel<<<(unsigned int)blocks, 256>>>(pa, py, n4, sf);
        kb_check_launch();
        done = n4 * 4;
    }
    if (done < n) {
        long long blocks = (n - done + 255) / 256;
        if (blocks > 1048576) blocks = 1048576;
        scale_scalar_kernel<<<(unsigned int)blocks, 256>>>(pa, py, done, n, sf);
        kb_check_launch();
    }
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_5_scale",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["scale_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return _ext.scale_forward(A, s)
