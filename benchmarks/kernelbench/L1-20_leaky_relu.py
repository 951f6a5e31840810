"""KernelBench L1-20: LeakyReLU: y = x > 0 ? x : x * negative_slope. One elementwise CUDA kernel (float4 body + scalar tail)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor leaky_relu_forward(torch::Tensor x, double negative_slope);
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

__device__ __forceinline__ float leaky_relu_op(float x, float negative_slope) {
    return x > 0.0f ? x : x * negative_slope;
}

// Vectorised body: n4 float4 elements (x and y 16-byte aligned).
__global__ void leaky_relu_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, long long n4, float negative_slope) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x4[i];
        v.x = leaky_relu_op(v.x, negative_slope);
        v.y = leaky_relu_op(v.y, negative_slope);
        v.z = leaky_relu_op(v.z, negative_slope);
        v.w = leaky_relu_op(v.w, negative_slope);
        y4[i] = v;
    }
}

// Scalar body for elements [start, n).
__global__ void leaky_relu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, long long start, long long n, float negative_slope) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = start + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = leaky_relu_op(x[i], negative_slope);
    }
}

torch::Tensor leaky_relu_forward(torch::Tensor x, double negative_slope) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const float negative_slope_f = static_cast<float>(negative_slope);
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
        leaky_relu_vec4_kernel<<<(unsigned int)blocks, threads>>>(px, py, n4, negative_slope_f);
        kb_check_launch();
        done = n4 * 4;
    }
    if (done < n) {
        long long blocks = (n - done + threads - 1) / threads;
        if (blocks > max_blocks) blocks = max_blocks;
        leaky_relu_scalar_kernel<<<(unsigned int)blocks, threads>>>(px, py, done, n, negative_slope_f);
        kb_check_launch();
    }
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_20_leaky_relu",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["leaky_relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.leaky_relu_forward(x, self.negative_slope)
