"""Pattern: the "kernel" hands the GEMM to cuBLAS directly (no ATen op for the recorder to see), adding a token
ReLU kernel. Caught by: native.library_call before the build; with that rule off, the kernel profile attributes
the GEMM to a library (kernels.library_kernels)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_relu_kernel(float* y, const float* b, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) { float v = y[i] + b[i % cols]; y[i] = v > 0.f ? v : 0.f; }
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    const int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    const float one = 1.f, zero = 0.f;
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    // y^T (N x M) = W (N x K) . x^T (K x M), column-major views of the row-major tensors.
    cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w.data_ptr<float>(), K, x.data_ptr<float>(), K,
                &zero, y.data_ptr<float>(), N);
    bias_relu_kernel<<<(M * N + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(),
                                                                                       b.data_ptr<float>(), M, N);
    return y;
}
"""

ext = load_inline(name="cublas_fallback", cpp_sources="torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=cuda_source, functions=["linear_relu"], extra_ldflags=["-lcublas"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_relu(x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous())
