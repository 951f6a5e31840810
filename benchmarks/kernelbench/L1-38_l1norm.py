"""KernelBench L1-38: x / mean(|x|, dim=1, keepdim=True). One block per row: sum of |x| (per-thread partials + shuffle/shared tree), then the division."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor l1norm_forward(torch::Tensor x);
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

// One block per row. mode 0: y = x / (sum|x| * inv_d) (L1 mean); mode 1: y = x / sqrt(sum x^2) (L2 norm).
__global__ void row_normalize_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long D,
                                     int vec, int mode, float inv_d) {
    __shared__ float sh[32];
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * D;
        float* yr = y + row * D;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        if (vec) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            for (long long i = threadIdx.x; i < (D >> 2); i += blockDim.x) {
                const float4 v = x4[i];
                if (mode == 0) { a0 += fabsf(v.x); a1 += fabsf(v.y); a2 += fabsf(v.z); a3 += fabsf(v.w); }
                else { a0 += v.x * v.x; a1 += v.y * v.y; a2 += v.z * v.z; a3 += v.w * v.w; }
            }
        } else {
            for (long long i = threadIdx.x; i < D; i += blockDim.x) {
                const float v = xr[i];
                if (mode == 0) a0 += fabsf(v); else a0 += v * v;
            }
        }
        const float total = block_reduce_sum((a0 + a1) + (a2 + a3), sh);
        const float d = (mode == 0) ? total * inv_d : sqrtf(total);
        if (vec) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            float4* y4 = reinterpret_cast<float4*>(yr);
            for (long long i = threadIdx.x; i < (D >> 2); i += blockDim.x) {
                const float4 v = x4[i];
                float4 o;
                o.x = v.x / d; o.y = v.y / d; o.z = v.z / d; o.w = v.w / d;
                y4[i] = o;
            }
        } else {
            for (long long i = threadIdx.x; i < D; i += blockDim.x) yr[i] = xr[i] / d;
        }
    }
}

static torch::Tensor row_normalize(torch::Tensor x, int mode) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 2, "expected a 2-D input (batch, dim)");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long rows = xc.size(0);
    const long long D = xc.size(1);
    if (rows == 0 || D == 0) return y;
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const int vec = ((D & 3) == 0 && ((reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(py)) & 15) == 0) ? 1 : 0;
    const float inv_d = static_cast<float>(1.0 / static_cast<double>(D));
    const long long blocks = rows < 1048576 ? rows : 1048576;
    row_normalize_kernel<<<(unsigned int)blocks, 512>>>(px, py, rows, D, vec, mode, inv_d);
    kb_check_launch();
    return y;
}

torch::Tensor l1norm_forward(torch::Tensor x) { return row_normalize(x, 0); }
"""

_ext = load_inline(
    name="kb_l1_38_l1norm",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["l1norm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.l1norm_forward(x)
