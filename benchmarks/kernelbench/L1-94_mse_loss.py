"""KernelBench L1-94: mean((predictions - targets)^2). Two-stage reduction: 2048 block partial sums of squared differences, then one block sums them and scales by 1/n; 0-dim output like torch.mean."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets);
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

__global__ void sqdiff_partial_kernel(const float* __restrict__ p, const float* __restrict__ t, long long n, int vec,
                                      float* __restrict__ partial) {
    __shared__ float sh[32];
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    long long start_scalar = 0;
    if (vec) {
        const float4* p4 = reinterpret_cast<const float4*>(p);
        const float4* t4 = reinterpret_cast<const float4*>(t);
        const long long n4 = n >> 2;
        for (long long i = tid; i < n4; i += stride) {
            const float4 a = p4[i];
            const float4 b = t4[i];
            const float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z, dw = a.w - b.w;
            a0 += dx * dx; a1 += dy * dy; a2 += dz * dz; a3 += dw * dw;
        }
        start_scalar = n4 << 2;
    }
    for (long long i = start_scalar + tid; i < n; i += stride) {
        const float d = p[i] - t[i];
        a0 += d * d;
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

torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda(), "predictions must be a CUDA tensor");
    TORCH_CHECK(predictions.scalar_type() == torch::kFloat32, "predictions must be float32");
    TORCH_CHECK(targets.is_cuda(), "targets must be a CUDA tensor");
    TORCH_CHECK(targets.scalar_type() == torch::kFloat32, "targets must be float32");
    TORCH_CHECK(predictions.sizes() == targets.sizes(), "predictions and targets must have the same shape");
    torch::Tensor pc = predictions.contiguous();
    torch::Tensor tc = targets.contiguous();
    const long long n = pc.numel();
    torch::Tensor out = torch::empty(std::vector<int64_t>{}, pc.options());
    const float* pp = pc.data_ptr<float>();
    const float* pt = tc.data_ptr<float>();
    const int nparts = 2048;
    torch::Tensor partial = torch::empty({nparts}, pc.options());
    const int vec = ((reinterpret_cast<uintptr_t>(pp) | reinterpret_cast<uintptr_t>(pt)) & 15) == 0 ? 1 : 0;
    sqdiff_partial_kernel<<<nparts, 256>>>(pp, pt, n, vec, partial.data_ptr<float>());
    kb_check_launch();
    const float scale = static_cast<float>(1.0 / static_cast<double>(n));  // n == 0 gives nan, like torch
    final_sum_kernel<<<1, 1024>>>(partial.data_ptr<float>(), nparts, 1, scale, out.data_ptr<float>());
    kb_check_launch();
    return out;
}
"""

_ext = load_inline(
    name="kb_l1_94_mse",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["mse_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        return _ext.mse_forward(predictions, targets)
