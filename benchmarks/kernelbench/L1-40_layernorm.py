"""KernelBench L1-40: nn.LayerNorm over the trailing (features, dim1, dim2) dims (elementwise affine). Three kernels: per-chunk Welford statistics (many blocks per row), a per-row Chan merge giving mean and rstd, and an elementwise normalise + affine pass."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);
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

// Chan et al. merge of (count, mean, M2) statistics.
__device__ __forceinline__ void welford_merge(float& n, float& mean, float& m2, float nb, float meanb, float m2b) {
    if (nb == 0.0f) return;
    const float nn = n + nb;
    const float delta = meanb - mean;
    const float frac = nb / nn;
    mean = mean + delta * frac;
    m2 = m2 + m2b + delta * delta * n * frac;
    n = nn;
}

// Merge the (n, mean, m2) of all threads of a block (blockDim.x = 256) into thread 0's.
__device__ __forceinline__ void block_welford(float& n, float& mean, float& m2) {
    __shared__ float sn[256];
    __shared__ float smean[256];
    __shared__ float sm2[256];
    sn[threadIdx.x] = n; smean[threadIdx.x] = mean; sm2[threadIdx.x] = m2;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            float a = sn[threadIdx.x], am = smean[threadIdx.x], a2 = sm2[threadIdx.x];
            welford_merge(a, am, a2, sn[threadIdx.x + w], smean[threadIdx.x + w], sm2[threadIdx.x + w]);
            sn[threadIdx.x] = a; smean[threadIdx.x] = am; sm2[threadIdx.x] = a2;
        }
        __syncthreads();
    }
    n = sn[0]; mean = smean[0]; m2 = sm2[0];
}

// Stage 1: block b handles chunk p = b % P of row r = b / P: elements [p*chunk, min(N, (p+1)*chunk)).
__global__ void ln_partial_kernel(const float* __restrict__ x, long long N, long long chunk, long long P, int vec,
                                  float* __restrict__ pn, float* __restrict__ pmean, float* __restrict__ pm2) {
    const long long r = blockIdx.x / P;
    const long long p = blockIdx.x - r * P;
    const long long lo = p * chunk;
    const long long hi = (lo + chunk < N) ? lo + chunk : N;
    const float* xr = x + r * N;
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    if (vec) {  // N and chunk are multiples of 4, row base 16-byte aligned
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long i = (lo >> 2) + threadIdx.x; i < (hi >> 2); i += blockDim.x) {
            const float4 v = x4[i];
            const float lm = ((v.x + v.y) + (v.z + v.w)) * 0.25f;
            const float dx = v.x - lm, dy = v.y - lm, dz = v.z - lm, dw = v.w - lm;
            const float lm2 = (dx * dx + dy * dy) + (dz * dz + dw * dw);
            welford_merge(n, mean, m2, 4.0f, lm, lm2);
        }
    } else {
        for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) welford_merge(n, mean, m2, 1.0f, xr[i], 0.0f);
    }
    block_welford(n, mean, m2);
    if (threadIdx.x == 0) { pn[blockIdx.x] = n; pmean[blockIdx.x] = mean; pm2[blockIdx.x] = m2; }
}

// Stage 2: one block per row merges its P partials; rstd = 1 / sqrt(M2 / N + eps) (biased variance).
__global__ void ln_finalize_kernel(const float* __restrict__ pn, const float* __restrict__ pmean,
                                   const float* __restrict__ pm2, long long P, long long N, float eps,
                                   float* __restrict__ mean_out, float* __restrict__ rstd_out) {
    const long long r = blockIdx.x;
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (long long p = threadIdx.x; p < P; p += blockDim.x)
        welford_merge(n, mean, m2, pn[r * P + p], pmean[r * P + p], pm2[r * P + p]);
    block_welford(n, mean, m2);
    if (threadIdx.x == 0) {
        mean_out[r] = mean;
        rstd_out[r] = rsqrtf(m2 / static_cast<float>(N) + eps);
    }
}

// Stage 3: y = (x - mean) * rstd * w + b, elementwise.
__global__ void ln_apply_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                const float* __restrict__ mean, const float* __restrict__ rstd,
                                float* __restrict__ y, long long rows, long long N, int vec) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec) {
        const long long N4 = N >> 2;
        const long long total4 = rows * N4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = tid; i < total4; i += stride) {
            const long long r = i / N4;
            const long long j = i - r * N4;
            const float mu = mean[r], rs = rstd[r];
            const float4 v = x4[i], ww = w4[j], bb = b4[j];
            float4 o;
            o.x = (v.x - mu) * rs * ww.x + bb.x;
            o.y = (v.y - mu) * rs * ww.y + bb.y;
            o.z = (v.z - mu) * rs * ww.z + bb.z;
            o.w = (v.w - mu) * rs * ww.w + bb.w;
            y4[i] = o;
        }
    } else {
        const long long total = rows * N;
        for (long long i = tid; i < total; i += stride) {
            const long long r = i / N;
            const long long j = i - r * N;
            y[i] = (x[i] - mean[r]) * rstd[r] * w[j] + b[j];
        }
    }
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(weight.is_cuda(), "weight must be a CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32, "weight must be float32");
    TORCH_CHECK(bias.is_cuda(), "bias must be a CUDA tensor");
    TORCH_CHECK(bias.scalar_type() == torch::kFloat32, "bias must be float32");
    const int64_t k = weight.dim();
    TORCH_CHECK(k >= 1 && x.dim() >= k, "input rank is smaller than normalized_shape");
    for (int64_t d = 0; d < k; ++d)
        TORCH_CHECK(x.size(x.dim() - k + d) == weight.size(d), "input trailing dims must equal normalized_shape");
    TORCH_CHECK(bias.sizes() == weight.sizes(), "bias shape must equal weight shape");
    torch::Tensor xc = x.contiguous();
    torch::Tensor wc = weight.contiguous();
    torch::Tensor bc = bias.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long N = wc.numel();
    if (xc.numel() == 0 || N == 0) return y;
    const long long rows = xc.numel() / N;
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const long long chunk = 4096;
    const long long P = (N + chunk - 1) / chunk;
    TORCH_CHECK(rows * P < 2147483647LL && rows < 2147483647LL, "input too large for this kernel's grid");
    torch::Tensor pn = torch::empty({rows * P}, xc.options());
    torch::Tensor pmean = torch::empty({rows * P}, xc.options());
    torch::Tensor pm2 = torch::empty({rows * P}, xc.options());
    torch::Tensor mean = torch::empty({rows}, xc.options());
    torch::Tensor rstd = torch::empty({rows}, xc.options());
    const uintptr_t align = reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(py) |
                            reinterpret_cast<uintptr_t>(wc.data_ptr<float>()) | reinterpret_cast<uintptr_t>(bc.data_ptr<float>());
    const int vec = ((N & 3) == 0 && (align & 15) == 0) ? 1 : 0;
    ln_partial_kernel<<<(unsigned int)(rows * P), 256>>>(px, N, chunk, P, vec, pn.data_ptr<float>(),
                                                         pmean.data_ptr<float>(), pm2.data_ptr<float>());
    kb_check_launch();
    ln_finalize_kernel<<<(unsigned int)rows, 256>>>(pn.data_ptr<float>(), pmean.data_ptr<float>(), pm2.data_ptr<float>(),
                                                    P, N, static_cast<float>(eps), mean.data_ptr<float>(),
                                                    rstd.data_ptr<float>());
    kb_check_launch();
    long long blocks = ((vec ? rows * N / 4 : rows * N) + 255) / 256;
    if (blocks > 1048576) blocks = 1048576;
    ln_apply_kernel<<<(unsigned int)blocks, 256>>>(px, wc.data_ptr<float>(), bc.data_ptr<float>(), mean.data_ptr<float>(),
                                                   rstd.data_ptr<float>(), py, rows, N, vec);
    kb_check_launch();
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_40_layernorm",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["layernorm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        # kept as the parameter container (weight, bias, eps); never called
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
