"""KernelBench L1-4: matrix-vector product A [M, K] @ B [K, 1]. One block per row: float4 loads, four fp32 partial sums per thread, warp-shuffle + shared-memory tree."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor matvec_forward(torch::Tensor A, torch::Tensor B);
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

__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float block_reduce_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_reduce_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nwarps) ? sh[lane] : 0.0f;
        t = warp_reduce_sum(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}

// One block per row of A: y[row] = sum_k A[row, k] * x[k] (per-thread partials, then a block tree).
__global__ void matvec_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
                              long long M, long long K, int vec) {
    __shared__ float sh[32];
    for (long long row = blockIdx.x; row < M; row += gridDim.x) {
        const float* ar = A + row * K;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        if (vec) {
            const float4* a4 = reinterpret_cast<const float4*>(ar);
            const float4* x4 = reinterpret_cast<const float4*>(x);
            for (long long i = threadIdx.x; i < (K >> 2); i += blockDim.x) {
                const float4 a = a4[i];
                const float4 b = x4[i];
                a0 = fmaf(a.x, b.x, a0); a1 = fmaf(a.y, b.y, a1); a2 = fmaf(a.z, b.z, a2); a3 = fmaf(a.w, b.w, a3);
            }
        } else {
            for (long long i = threadIdx.x; i < K; i += blockDim.x) a0 = fmaf(ar[i], x[i], a0);
        }
        const float total = block_reduce_sum((a0 + a1) + (a2 + a3), sh);
        if (threadIdx.x == 0) y[row] = total;
    }
}

torch::Tensor matvec_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(B.scalar_type() == torch::kFloat32, "B must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && B.size(1) == 1, "expected A [M, K] and B [K, 1]");
    TORCH_CHECK(A.size(1) == B.size(0), "inner dimensions must match");
    torch::Tensor Ac = A.contiguous();
    torch::Tensor Bc = B.contiguous();
    const long long M = Ac.size(0), K = Ac.size(1);
    torch::Tensor y = torch::empty({M, 1}, Ac.options());
    if (M == 0) return y;
    const float* pa = Ac.data_ptr<float>();
    const float* pb = Bc.data_ptr<float>();
    const int vec = ((K & 3) == 0 && ((reinterpret_cast<uintptr_t>(pa) | reinterpret_cast<uintptr_t>(pb)) & 15) == 0) ? 1 : 0;
    const long long blocks = M < 1048576 ? M : 1048576;
    matvec_kernel<<<(unsigned int)blocks, 512>>>(pa, pb, y.data_ptr<float>(), M, K, vec);
    kb_check_launch();
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_4_matvec",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["matvec_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.matvec_forward(A, B)
