"""KernelBench L1-37: x / ||x||_F. Two-stage sum of squares (2048 block partials, then one block), sqrt on the device, then an elementwise division kernel."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor frobenius_normalize_forward(torch::Tensor x);
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

// Stage 1 of a whole-tensor reduction: partial[blockIdx.x] = sum over a grid-stride slice of f(x) (and y).
__global__ void sumsq_partial_kernel(const float* __restrict__ x, long long n, int vec, float* __restrict__ partial) {
    __shared__ float sh[32];
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    long long start_scalar = 0;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const long long n4 = n >> 2;
        for (long long i = tid; i < n4; i += stride) {
            const float4 v = x4[i];
            a0 += v.x * v.x; a1 += v.y * v.y; a2 += v.z * v.z; a3 += v.w * v.w;
        }
        start_scalar = n4 << 2;
    }
    for (long long i = start_scalar + tid; i < n; i += stride) {
        const float v = x[i];
        a0 += v * v;
    }
    const float total = block_reduce_sum((a0 + a1) + (a2 + a3), sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// Stage 2: one block sums the partials; out[0] = mode 0: sqrt(total), mode 1: total * scale.
__global__ void final_sum_kernel(const float* __restrict__ partial, int nparts, int mode, float scale, float* __restrict__ out) {
    __shared__ float sh[32];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += partial[i];
    const float total = block_reduce_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = (mode == 0) ? sqrtf(total) : total * scale;
}

// y = x / norm[0] (norm computed on the device by the two stages above).
__global__ void div_by_scalar_kernel(const float* __restrict__ x, const float* __restrict__ norm,
                                     float* __restrict__ y, long long n, int vec) {
    const float d = norm[0];
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long start_scalar = 0;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        const long long n4 = n >> 2;
        for (long long i = tid; i < n4; i += stride) {
            const float4 v = x4[i];
            float4 o;
            o.x = v.x / d; o.y = v.y / d; o.z = v.z / d; o.w = v.w / d;
            y4[i] = o;
        }
        start_scalar = n4 << 2;
    }
    for (long long i = start_scalar + tid; i < n; i += stride) y[i] = x[i] / d;
}

torch::Tensor frobenius_normalize_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const int nparts = 2048;
    torch::Tensor partial = torch::empty({nparts}, xc.options());
    torch::Tensor norm = torch::empty({1}, xc.options());
    const int vec = ((reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(py)) & 15) == 0 ? 1 : 0;
    sumsq_partial_kernel<<<nparts, 256>>>(px, n, vec, partial.data_ptr<float>());
    kb_check_launch();
    final_sum_kernel<<<1, 1024>>>(partial.data_ptr<float>(), nparts, 0, 1.0f, norm.data_ptr<float>());
    kb_check_launch();
    long long blocks = (n / 4 + 255) / 256;
    if (blocks < 1) blocks = 1;
    if (blocks > 1048576) blocks = 1048576;
    div_by_scalar_kernel<<<(unsigned int)blocks, 256>>>(px, norm.data_ptr<float>(), py, n, vec);
    kb_check_launch();
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_37_fro",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["frobenius_normalize_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.frobenius_normalize_forward(x)
