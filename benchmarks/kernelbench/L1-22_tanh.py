"""KernelBench L1-22: Tanh. One elementwise CUDA kernel (float4 body + scalar tail)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor tanh_forward(torch::Tensor x);
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

__device__ __forceinline__ float tanh_op(float x) {
    return tanhf(x);
}

// Vectorised body: n4 float4 elements (x and y 16-byte aligned).
__global__ void tanh_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, long long n4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x4[i];
        v.x = tanh_op(v.x);
        v.y = tanh_op(v.y);
        v.z = tanh_op(v.z);
        v.w = tanh_op(v.w);
        y4[i] = v;
    }
}

// Scalar body for elements [start, n).
__global__ void tanh_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, long long start, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = tanh_op(x[i]);
    }
}

torch::Tensor tanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const int threads = 256;
    const long long max_blocks = 1048576;
    long long done = 0;
    const bool aligned = ((reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(py)) & 15) == 0;
    if (aligned && n >= 4) {
        const long long n4 = n / 4;
        long long blocks = (n4 + threads - 1) / threads;
        if (blocks > max_blocks) blocks = max_blocks;
        tanh_vec4_kernel<<<(unsigned int)blocks, threads>>>(px, py, n4);
        kb_check_launch();
        done = n4 * 4;
    }
    if (done < n) {
        long long blocks = (n - done + threads - 1) / threads;
        if (blocks > max_blocks) blocks = max_blocks;
        tanh_scalar_kernel<<<(unsigned int)blocks, threads>>>(px, py, done, n);
        kb_check_launch();
    }
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_22_tanh",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["tanh_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.tanh_forward(x)
