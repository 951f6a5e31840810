"""KernelBench L1-49: torch.max(x, dim)[0]. x viewed as [outer, R, inner]: one thread per output looping over R (coalesced across inner); a block-per-row kernel when the reduced dim is the last one."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor max_dim_forward(torch::Tensor x, int64_t dim);
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

// op: 0 = sum, 1 = mean (sum * scale), 2 = max, 3 = min. Sums use Kahan compensation (fp32).
__device__ __forceinline__ float pick(float m, float v, int op) {
    // NaN-propagating max / min like torch
    if (v != v) return v;
    if (op == 2) return v > m ? v : m;
    return v < m ? v : m;
}

// inner > 1: one thread per (outer, inner) output, looping over the reduced dim (coalesced across inner).
__global__ void reduce_mid_kernel(const float* __restrict__ x, float* __restrict__ y,
                                  long long outer, long long R, long long inner, int op, float scale) {
    const long long total = outer * inner;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const long long o = idx / inner;
        const long long i = idx - o * inner;
        const float* p = x + o * R * inner + i;
        if (op <= 1) {
            float s = 0.0f, c = 0.0f;
            for (long long r = 0; r < R; ++r) {
                const float yv = p[r * inner] - c;
                const float t = s + yv;
                c = (t - s) - yv;
                s = t;
            }
            y[idx] = (op == 1) ? s * scale : s;
        } else {
            float m = p[0];
            for (long long r = 1; r < R; ++r) m = pick(m, p[r * inner], op);
            y[idx] = m;
        }
    }
}

// inner == 1: one block per output (a contiguous row of length R).
__global__ void reduce_last_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   long long outer, long long R, int op, float scale) {
    __shared__ float sh[32];
    __shared__ float shm[1024];
    for (long long o = blockIdx.x; o < outer; o += gridDim.x) {
        const float* p = x + o * R;
        if (op <= 1) {
            float s = 0.0f, c = 0.0f;
            for (long long r = threadIdx.x; r < R; r += blockDim.x) {
                const float yv = p[r] - c;
                const float t = s + yv;
                c = (t - s) - yv;
                s = t;
            }
            const float total = block_reduce_sum(s, sh);
            if (threadIdx.x == 0) y[o] = (op == 1) ? total * scale : total;
        } else {
            float m = p[threadIdx.x < R ? threadIdx.x : 0];
            for (long long r = threadIdx.x + blockDim.x; r < R; r += blockDim.x) m = pick(m, p[r], op);
            __syncthreads();
            shm[threadIdx.x] = m;
            __syncthreads();
            for (int w = blockDim.x >> 1; w > 0; w >>= 1) {
                if (threadIdx.x < w) shm[threadIdx.x] = pick(shm[threadIdx.x], shm[threadIdx.x + w], op);
                __syncthreads();
            }
            if (threadIdx.x == 0) y[o] = shm[0];
        }
    }
}

static torch::Tensor reduce_dim(torch::Tensor x, int64_t dim, bool keepdim, int op) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "expected at least a 1-D input");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    torch::Tensor xc = x.contiguous();
    const long long R = xc.size(dim);
    long long outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    std::vector<int64_t> sizes = xc.sizes().vec();
    if (keepdim) sizes[dim] = 1; else sizes.erase(sizes.begin() + dim);
    torch::Tensor y = torch::empty(sizes, xc.options());
    if (outer * inner == 0) return y;
    TORCH_CHECK(R > 0 || op == 0, "cannot reduce over an empty dimension");
    const float scale = static_cast<float>(1.0 / static_cast<double>(R > 0 ? R : 1));
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    if (R == 0) {
        // empty sum: zeros (the loops below write 0 for R == 0)
        long long blocks = (outer * inner + 255) / 256;
        if (blocks > 1048576) blocks = 1048576;
        reduce_mid_kernel<<<(unsigned int)blocks, 256>>>(px, py, outer * inner, 0, 1, 0, scale);
    } else if (inner > 1) {
        long long blocks = (outer * inner + 255) / 256;
        if (blocks > 1048576) blocks = 1048576;
        reduce_mid_kernel<<<(unsigned int)blocks, 256>>>(px, py, outer, R, inner, op, scale);
    } else {
        const long long blocks = outer < 1048576 ? outer : 1048576;
        reduce_last_kernel<<<(unsigned int)blocks, 256>>>(px, py, outer, R, op, scale);
    }
    kb_check_launch();
    return y;
}

torch::Tensor max_dim_forward(torch::Tensor x, int64_t dim) { return reduce_dim(x, dim, false, 2); }
"""

_ext = load_inline(
    name="kb_l1_49_max_dim",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["max_dim_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.max_dim_forward(x, self.dim)
