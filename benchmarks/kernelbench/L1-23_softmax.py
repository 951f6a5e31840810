"""KernelBench L1-23: softmax over dim 1. One block per row: online max/sum-of-exp per thread, warp-shuffle + shared-memory merge, then exp(x - max) / sum."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor softmax_forward(torch::Tensor x);
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

// Online (max, sum of exp(x - max)) statistics of a row, merged across threads.
__device__ __forceinline__ void online_update(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else if (m != -INFINITY) {
        s += expf(v - m);
    }
}

__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2) {
    if (m2 == -INFINITY) return;          // the other side saw nothing
    if (m == -INFINITY) { m = m2; s = s2; return; }
    const float mx = fmaxf(m, m2);
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

// One block per row (grid-stride over rows). log_mode = 0: softmax, 1: log-softmax.
__global__ void row_softmax_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   long long rows, long long D, int vec, int log_mode) {
    __shared__ float sh_m[32];
    __shared__ float sh_s[32];
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * D;
        float* yr = y + row * D;
        float m = -INFINITY, s = 0.0f;
        if (vec) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const long long D4 = D >> 2;
            for (long long i = threadIdx.x; i < D4; i += blockDim.x) {
                const float4 v = x4[i];
                online_update(m, s, v.x);
                online_update(m, s, v.y);
                online_update(m, s, v.z);
                online_update(m, s, v.w);
            }
        } else {
            for (long long i = threadIdx.x; i < D; i += blockDim.x) online_update(m, s, xr[i]);
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
            const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
            ms_merge(m, s, m2, s2);
        }
        __syncthreads();   // the previous row's readers of sh_m[0] / sh_s[0] are done
        if (lane == 0) { sh_m[wid] = m; sh_s[wid] = s; }
        __syncthreads();
        if (wid == 0) {
            m = (lane < nwarps) ? sh_m[lane] : -INFINITY;
            s = (lane < nwarps) ? sh_s[lane] : 0.0f;
            for (int o = 16; o > 0; o >>= 1) {
                const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
                const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
                ms_merge(m, s, m2, s2);
            }
            if (lane == 0) { sh_m[0] = m; sh_s[0] = s; }
        }
        __syncthreads();
        const float mx = sh_m[0];
        const float sum = sh_s[0];
        const float logsum = logf(sum);
        if (vec) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            float4* y4 = reinterpret_cast<float4*>(yr);
            const long long D4 = D >> 2;
            for (long long i = threadIdx.x; i < D4; i += blockDim.x) {
                const float4 v = x4[i];
                float4 o;
                if (log_mode) {
                    o.x = (v.x - mx) - logsum; o.y = (v.y - mx) - logsum;
                    o.z = (v.z - mx) - logsum; o.w = (v.w - mx) - logsum;
                } else {
                    o.x = expf(v.x - mx) / sum; o.y = expf(v.y - mx) / sum;
                    o.z = expf(v.z - mx) / sum; o.w = expf(v.w - mx) / sum;
                }
                y4[i] = o;
            }
        } else {
            for (long long i = threadIdx.x; i < D; i += blockDim.x) {
                const float v = xr[i];
                yr[i] = log_mode ? (v - mx) - logsum : expf(v - mx) / sum;
            }
        }
    }
}

static torch::Tensor row_softmax(torch::Tensor x, int log_mode) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 2, "expected a 2-D input (batch, features)");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long rows = xc.size(0);
    const long long D = xc.size(1);
    if (rows == 0 || D == 0) return y;
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const int vec = ((D & 3) == 0 && ((reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(py)) & 15) == 0) ? 1 : 0;
    const int threads = D >= 65536 ? 1024 : 256;
    const long long blocks = rows < 1048576 ? rows : 1048576;
    row_softmax_kernel<<<(unsigned int)blocks, threads>>>(px, py, rows, D, vec, log_mode);
    kb_check_launch();
    return y;
}

torch::Tensor softmax_forward(torch::Tensor x) { return row_softmax(x, 0); }
"""

_ext = load_inline(
    name="kb_l1_23_softmax",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["softmax_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x)
