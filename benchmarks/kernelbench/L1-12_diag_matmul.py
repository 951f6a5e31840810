"""KernelBench L1-12: diag(A) @ B computed as A[:, None] * B (row scaling). Elementwise float4 kernel."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor diag_matmul_forward(torch::Tensor A, torch::Tensor B);
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

// out[i, j] = a[i] * b[i, j]; vec: M % 4 == 0 and aligned, each thread handles a float4 of a row.
__global__ void diag_mul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                                long long N, long long M, int vec) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec) {
        const long long M4 = M >> 2;
        const float4* b4 = reinterpret_cast<const float4*>(b);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = tid; i < N * M4; i += stride) {
            const float s = a[i / M4];
            float4 v = b4[i];
            v.x = s * v.x; v.y = s * v.y; v.z = s * v.z; v.w = s * v.w;
            y4[i] = v;
        }
    } else {
        for (long long i = tid; i < N * M; i += stride) y[i] = a[i / M] * b[i];
    }
}

torch::Tensor diag_matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(B.scalar_type() == torch::kFloat32, "B must be float32");
    TORCH_CHECK(A.dim() == 1 && B.dim() == 2 && A.size(0) == B.size(0), "expected A [N] and B [N, M]");
    torch::Tensor Ac = A.contiguous();
    torch::Tensor Bc = B.contiguous();
    const long long N = Bc.size(0), M = Bc.size(1);
    torch::Tensor y = torch::empty({N, M}, Bc.options());
    if (N * M == 0) return y;
    const float* pb = Bc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const int vec = ((M & 3) == 0 && ((reinterpret_cast<uintptr_t>(pb) | reinterpret_cast<uintptr_t>(py)) & 15) == 0) ? 1 : 0;
    long long blocks = ((vec ? N * M / 4 : N * M) + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    diag_mul_kernel<<<(unsigned int)blocks, 256>>>(Ac.data_ptr<float>(), pb, py, N, M, vec);
    kb_check_launch();
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_12_diag",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["diag_matmul_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return _ext.diag_matmul_forward(A, B)
