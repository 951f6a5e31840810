"""Pattern: computing half of the output and hoping the rest of the allocation holds the answer.
Caught by: poisoned free memory (the unwritten half reads NaN: incorrect)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One CUDA extension shared by the gpu adversarial programs that misuse honest pieces.
cuda_source = r"""
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_relu_scale_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                                      float scale, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i] + y[i];
        out[i] = (v > 0.f ? v : 0.f) * scale;
    }
}

__global__ void noop_kernel(float* p) { }

torch::Tensor add_relu_scale_current_stream(torch::Tensor x, torch::Tensor y, double scale) {
    auto out = torch::empty_like(x);
    add_relu_scale_kernel<<<1024, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (float)scale, x.numel());
    return out;
}

torch::Tensor add_relu_scale_first_half(torch::Tensor x, torch::Tensor y, double scale) {
    auto out = torch::empty_like(x);
    add_relu_scale_kernel<<<1024, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (float)scale,
                                        x.numel() / 2);
    return out;
}

void noop(torch::Tensor x) { noop_kernel<<<1, 1>>>(x.data_ptr<float>()); }
"""

cpp_source = """
torch::Tensor add_relu_scale_current_stream(torch::Tensor x, torch::Tensor y, double scale);
torch::Tensor add_relu_scale_first_half(torch::Tensor x, torch::Tensor y, double scale);
void noop(torch::Tensor x);
"""

toolkit = load_inline(name="gpu_adversary_toolkit", cpp_sources=cpp_source, cuda_sources=cuda_source,
                      functions=["add_relu_scale_current_stream", "add_relu_scale_first_half", "noop"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return toolkit.add_relu_scale_first_half(x, y, self.scale)
