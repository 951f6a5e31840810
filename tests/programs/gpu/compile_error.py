import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One CUDA extension shared by every GPU failure-mode program (one build for all of them).
cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdlib>

__global__ void add_relu_scale_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                                      float scale, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float v = x[i] + y[i]  // missing semicolon
        out[i] = (v > 0.f ? v : 0.f) * scale;
    }
}

__global__ void add_relu_scale_twice_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                            float* __restrict__ out, float scale, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int rep = 0; rep < 2; ++rep) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            float v = x[i] + y[i];
            out[i] = (v > 0.f ? v : 0.f) * scale;
        }
    }
}

__global__ void illegal_address_kernel(float* out) {
    float* bad = reinterpret_cast<float*>(0x10);
    bad[threadIdx.x] = out[threadIdx.x];
}

__global__ void spin_kernel(volatile int* flag) {
    while (flag[0] == 0) { }
}

torch::Tensor add_relu_scale(torch::Tensor x, torch::Tensor y, double scale) {
    auto out = torch::empty_like(x);
    long long n = x.numel();
    add_relu_scale_kernel<<<1024, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (float)scale, n);
    return out;
}

torch::Tensor add_relu_scale_twice(torch::Tensor x, torch::Tensor y, double scale) {
    auto out = torch::empty_like(x);
    long long n = x.numel();
    add_relu_scale_twice_kernel<<<1024, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (float)scale, n);
    return out;
}

torch::Tensor illegal_address(torch::Tensor x) {
    auto out = torch::empty_like(x);
    illegal_address_kernel<<<1, 32>>>(out.data_ptr<float>());
    return out;
}

torch::Tensor spin(torch::Tensor x) {
    auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
    spin_kernel<<<1, 1>>>(flag.data_ptr<int>());
    return torch::empty_like(x);
}

void exit_quietly() { std::_Exit(0); }
"""

cpp_source = """
torch::Tensor add_relu_scale(torch::Tensor x, torch::Tensor y, double scale);
torch::Tensor add_relu_scale_twice(torch::Tensor x, torch::Tensor y, double scale);
torch::Tensor illegal_address(torch::Tensor x);
torch::Tensor spin(torch::Tensor x);
void exit_quietly();
"""

faults = load_inline(
    name="gpu_broken",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_relu_scale", "add_relu_scale_twice", "illegal_address", "spin", "exit_quietly"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return faults.add_relu_scale(x, y, self.scale)
