"""Pattern: the C++ launches the kernel on a stream of its own and returns without waiting for it.
Caught by: native.stream_creation before the build; with that rule off, the kernel profile (kernels.side_stream)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>

__global__ void add_relu_scale_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                                      float scale, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i] + y[i];
        out[i] = (v > 0.f ? v : 0.f) * scale;
    }
}

static cudaStream_t side_stream() {
    static cudaStream_t s = nullptr;
    if (s == nullptr) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
}

torch::Tensor fused(torch::Tensor x, torch::Tensor y, double scale) {
    auto out = torch::empty_like(x);
    add_relu_scale_kernel<<<1024, 256, 0, side_stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                            out.data_ptr<float>(), (float)scale, x.numel());
    return out;
}
"""

ext = load_inline(name="side_stream_native", cpp_sources="torch::Tensor fused(torch::Tensor x, torch::Tensor y, double scale);",
                  cuda_sources=cuda_source, functions=["fused"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.fused(x, y, self.scale)
