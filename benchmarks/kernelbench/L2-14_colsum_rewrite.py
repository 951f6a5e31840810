"""KernelBench L2-14: sum(x @ W^T / 2, dim=1, keepdim) * scaling_factor, rewritten exactly as (x . colsum(W)) / 2 * scaling_factor: a two-stage column-sum kernel over W, then a block-per-row dot product (no GEMM is needed; the column sum is recomputed on every call)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor gemm_divide_sum_scale_forward(torch::Tensor x, torch::Tensor weight, double scaling_factor);
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

// partial[c, k] = sum of W[j, k] over rows j of chunk c (chunks of `rows_per_chunk` rows).
__global__ void colsum_partial_kernel(const float* __restrict__ W, float* __restrict__ partial, int H, int K,
                                      int rows_per_chunk) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int c = blockIdx.y;
    if (k >= K) return;
    const int j0 = c * rows_per_chunk;
    const int j1 = (j0 + rows_per_chunk < H) ? j0 + rows_per_chunk : H;
    float s = 0.0f;
    for (int j = j0; j < j1; ++j) s += W[(size_t)j * K + k];
    partial[(size_t)c * K + k] = s;
}

// wsum[k] = sum over chunks of partial[c, k].
__global__ void colsum_final_kernel(const float* __restrict__ partial, float* __restrict__ wsum, int K, int chunks) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    float s = 0.0f;
    for (int c = 0; c < chunks; ++c) s += partial[(size_t)c * K + k];
    wsum[k] = s;
}

// out[b] = (sum_k x[b, k] * wsum[k]) * 0.5 * scale; one block per row.
__global__ void rowdot_kernel(const float* __restrict__ x, const float* __restrict__ wsum, float* __restrict__ out,
                              int B, int K, float scale) {
    __shared__ float sh[32];
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        float acc = 0.0f;
        for (int k = threadIdx.x; k < K; k += blockDim.x) acc = fmaf(x[(size_t)b * K + k], wsum[k], acc);
        const float total = block_reduce_sum(acc, sh);
        if (threadIdx.x == 0) out[b] = (total / 2.0f) * scale;
    }
}

torch::Tensor gemm_divide_sum_scale_forward(torch::Tensor x, torch::Tensor weight, double scaling_factor) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(weight.is_cuda(), "weight must be a CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32, "weight must be float32");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "expected x [B, in], weight [hidden, in]");
    TORCH_CHECK(x.size(0) < 2147483647LL && weight.size(0) < 2147483647LL && weight.size(1) < 2147483647LL, "sizes too large");
    torch::Tensor xc = x.contiguous();
    torch::Tensor wc = weight.contiguous();
    const int B = (int)xc.size(0), K = (int)xc.size(1), H = (int)wc.size(0);
    torch::Tensor out = torch::empty({B, 1}, xc.options());
    if (B == 0) return out;
    const int rows_per_chunk = 128;
    int chunks = (H + rows_per_chunk - 1) / rows_per_chunk;
    if (chunks < 1) chunks = 1;
    TORCH_CHECK(chunks <= 65535, "hidden size too large for this grid");
    torch::Tensor partial = torch::empty({chunks, K > 0 ? K : 1}, xc.options());
    torch::Tensor wsum = torch::empty({K > 0 ? K : 1}, xc.options());
    if (K > 0) {
        colsum_partial_kernel<<<dim3((K + 255) / 256, chunks), 256>>>(wc.data_ptr<float>(), partial.data_ptr<float>(), H, K,
                                                                    rows_per_chunk);
        kb_check_launch();
        colsum_final_kernel<<<(K + 255) / 256, 256>>>(partial.data_ptr<float>(), wsum.data_ptr<float>(), K, chunks);
        kb_check_launch();
    }
    const int blocks = B < 65535 ? B : 65535;
    rowdot_kernel<<<blocks, 512>>>(xc.data_ptr<float>(), wsum.data_ptr<float>(), out.data_ptr<float>(), B, K,
                                   static_cast<float>(scaling_factor));
    kb_check_launch();
    return out;
}
"""

_ext = load_inline(
    name="kb_l2_14_colsum_rewrite",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gemm_divide_sum_scale_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return _ext.gemm_divide_sum_scale_forward(x, self.weight, self.scaling_factor)
