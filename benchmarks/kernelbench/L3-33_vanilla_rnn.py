"""KernelBench L3-33: one vanilla RNN step: hidden = tanh(i2h(cat(x, h0))); output = h2o(hidden). A concat kernel, then two tiled SGEMMs (tanh fused into the first one's epilogue). The new hidden state is kept in self.hidden like the reference."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
std::vector<torch::Tensor> rnn_cell_forward(torch::Tensor x, torch::Tensor h, torch::Tensor wi, torch::Tensor bi, torch::Tensor wo, torch::Tensor bo);
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

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu_erf_(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float mish_(float x) { return x * tanhf(log1pf(expf(x))); }

#define GEMM_BM 128
#define GEMM_BN 128
#define GEMM_BK 16
#define GEMM_PAD 4

// Loads rows [r0, r0 + 128) x cols [k0, k0 + 16) of a row-major [rows, K] matrix: this thread's 2 x 4 values.
__device__ __forceinline__ void gemm_load_tile_k(const float* __restrict__ P, int rows, int K, int r0, int k0,
                                                 int lrow, int lk, int vec, float (&r)[2][4]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int row = r0 + lrow + 64 * i;
        const int k = k0 + lk;
        if (vec) {
            if (row < rows && k < K) {   // K % 4 == 0, so k < K implies k + 3 < K
                const float4 t = *reinterpret_cast<const float4*>(P + (size_t)row * K + k);
                r[i][0] = t.x; r[i][1] = t.y; r[i][2] = t.z; r[i][3] = t.w;
            } else {
                r[i][0] = 0.0f; r[i][1] = 0.0f; r[i][2] = 0.0f; r[i][3] = 0.0f;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                r[i][j] = (row < rows && k + j < K) ? P[(size_t)row * K + k + j] : 0.0f;
        }
    }
}

__device__ __forceinline__ float epi_tanh(float v, int col) { return tanhf(v); }
__device__ __forceinline__ float epi_identity(float v, int col) { return v; }

// out[r, :] = [a[r, :], b[r, :]] (concatenation along dim 1).
__global__ void concat_cols_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                   long long rows, long long ca, long long cb) {
    const long long w = ca + cb;
    const long long total = rows * w;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long r = i / w;
        const long long c = i - r * w;
        out[i] = c < ca ? a[r * ca + c] : b[r * cb + (c - ca)];
    }
}

__global__ void __launch_bounds__(256) linear_tanh_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ C,
                                            int M, int N, int K, int vec_ab, int vec_c ) {
    __shared__ __align__(16) float As[2][GEMM_BK][GEMM_BM + GEMM_PAD];
    __shared__ __align__(16) float Bs[2][GEMM_BK][GEMM_BN + GEMM_PAD];
    const int tid = threadIdx.x;
    const int tx = tid & 15;
    const int ty = tid >> 4;
    const int m0 = blockIdx.y * GEMM_BM;
    const int n0 = blockIdx.x * GEMM_BN;
    const int lrow = tid >> 2;
    const int lk = (tid & 3) << 2;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    float ra[2][4], rb[2][4];
    const int ktiles = (K + GEMM_BK - 1) / GEMM_BK;
    gemm_load_tile_k(A, M, K, m0, 0, lrow, lk, vec_ab, ra);
    gemm_load_tile_k(B, N, K, n0, 0, lrow, lk, vec_ab, rb);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            As[0][lk + j][lrow + 64 * i] = ra[i][j];
            Bs[0][lk + j][lrow + 64 * i] = rb[i][j];
        }
    __syncthreads();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) {
            gemm_load_tile_k(A, M, K, m0, (kt + 1) * GEMM_BK, lrow, lk, vec_ab, ra);
            gemm_load_tile_k(B, N, K, n0, (kt + 1) * GEMM_BK, lrow, lk, vec_ab, rb);
        }
#pragma unroll
        for (int k = 0; k < GEMM_BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (has_next) {
            // buffer cur ^ 1 was last read in iteration kt - 1, which ended with a barrier
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    As[cur ^ 1][lk + j][lrow + 64 * i] = ra[i][j];
                    Bs[cur ^ 1][lk + j][lrow + 64 * i] = rb[i][j];
                }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = n0 + h * 64 + tx * 4;
            float o[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int c = col + j;
                float v = acc[i][h * 4 + j];
                if (c < N) {
                    if (bias != nullptr) v += bias[c];
                    o[j] = epi_tanh(v, c );
                } else {
                    o[j] = 0.0f;
                }
            }
            float* dst = C + (size_t)row * N + col;
            if (vec_c && col + 3 < N) {
                *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) dst[j] = o[j];
            }
        }
    }
}

__global__ void __launch_bounds__(256) linear_plain_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ C,
                                            int M, int N, int K, int vec_ab, int vec_c ) {
    __shared__ __align__(16) float As[2][GEMM_BK][GEMM_BM + GEMM_PAD];
    __shared__ __align__(16) float Bs[2][GEMM_BK][GEMM_BN + GEMM_PAD];
    const int tid = threadIdx.x;
    const int tx = tid & 15;
    const int ty = tid >> 4;
    const int m0 = blockIdx.y * GEMM_BM;
    const int n0 = blockIdx.x * GEMM_BN;
    const int lrow = tid >> 2;
    const int lk = (tid & 3) << 2;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    float ra[2][4], rb[2][4];
    const int ktiles = (K + GEMM_BK - 1) / GEMM_BK;
    gemm_load_tile_k(A, M, K, m0, 0, lrow, lk, vec_ab, ra);
    gemm_load_tile_k(B, N, K, n0, 0, lrow, lk, vec_ab, rb);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            As[0][lk + j][lrow + 64 * i] = ra[i][j];
            Bs[0][lk + j][lrow + 64 * i] = rb[i][j];
        }
    __syncthreads();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) {
            gemm_load_tile_k(A, M, K, m0, (kt + 1) * GEMM_BK, lrow, lk, vec_ab, ra);
            gemm_load_tile_k(B, N, K, n0, (kt + 1) * GEMM_BK, lrow, lk, vec_ab, rb);
        }
#pragma unroll
        for (int k = 0; k < GEMM_BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (has_next) {
            // buffer cur ^ 1 was last read in iteration kt - 1, which ended with a barrier
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    As[cur ^ 1][lk + j][lrow + 64 * i] = ra[i][j];
                    Bs[cur ^ 1][lk + j][lrow + 64 * i] = rb[i][j];
                }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = n0 + h * 64 + tx * 4;
            float o[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int c = col + j;
                float v = acc[i][h * 4 + j];
                if (c < N) {
                    if (bias != nullptr) v += bias[c];
                    o[j] = epi_identity(v, c );
                } else {
                    o[j] = 0.0f;
                }
            }
            float* dst = C + (size_t)row * N + col;
            if (vec_c && col + 3 < N) {
                *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) dst[j] = o[j];
            }
        }
    }
}

// Checks x [M, K] and weight [N, K] (nn.Linear layout) and an optional bias [N].
static void check_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool has_bias) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "x and weight must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "x and weight must be float32");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "expected x [batch, in] and weight [out, in]");
    TORCH_CHECK(x.size(1) == w.size(1), "in_features mismatch");
    TORCH_CHECK(x.size(0) <= 2147483647LL && w.size(0) <= 2147483647LL && w.size(1) <= 2147483647LL, "sizes too large");
    if (has_bias) {
        TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32, "bias must be a float32 CUDA tensor");
        TORCH_CHECK(b.numel() == w.size(0), "bias must have out_features elements");
    }
}

// Returns {output, new_hidden}: new_hidden = tanh(cat(x, h) @ Wi2h^T + bi2h), output = new_hidden @ Wh2o^T + bh2o.
std::vector<torch::Tensor> rnn_cell_forward(torch::Tensor x, torch::Tensor h, torch::Tensor wi, torch::Tensor bi,
                                            torch::Tensor wo, torch::Tensor bo) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(h.is_cuda(), "h must be a CUDA tensor");
    TORCH_CHECK(h.scalar_type() == torch::kFloat32, "h must be float32");
    TORCH_CHECK(x.dim() == 2 && h.dim() == 2 && x.size(0) == h.size(0), "expected x [B, in] and hidden [B, hidden]");
    torch::Tensor xc = x.contiguous();
    torch::Tensor hc = h.contiguous();
    const long long B = xc.size(0), I = xc.size(1), H = hc.size(1);
    torch::Tensor combined = torch::empty({B, I + H}, xc.options());
    check_linear(combined, wi, bi, true);
    TORCH_CHECK(wi.size(0) == H, "i2h must map to hidden_size");
    TORCH_CHECK(wo.is_cuda() && wo.scalar_type() == torch::kFloat32 && wo.dim() == 2 && wo.size(1) == H,
                "h2o weight must be a float32 CUDA [out, hidden] tensor");
    TORCH_CHECK(bo.is_cuda() && bo.scalar_type() == torch::kFloat32 && bo.numel() == wo.size(0), "bad h2o bias");
    torch::Tensor wic = wi.contiguous(), bic = bi.contiguous(), woc = wo.contiguous(), boc = bo.contiguous();
    const int O = (int)woc.size(0);
    torch::Tensor hnew = torch::empty({B, H}, xc.options());
    torch::Tensor out = torch::empty({B, O}, xc.options());
    if (B == 0) return {out, hnew};
    {
        long long blocks = (B * (I + H) + 255) / 256;
        if (blocks > 1048576) blocks = 1048576;
        concat_cols_kernel<<<(unsigned int)blocks, 256>>>(xc.data_ptr<float>(), hc.data_ptr<float>(),
                                                          combined.data_ptr<float>(), B, I, H);
        kb_check_launch();
    }
    const float* Cb = combined.data_ptr<float>();
    const float* Wi = wic.data_ptr<float>();
    const float* Wo = woc.data_ptr<float>();
    float* Hn = hnew.data_ptr<float>();
    float* Op = out.data_ptr<float>();
    const int Mi = (int)B, Ni = (int)H, Ki = (int)(I + H);
    if (Ni > 0) {
    {
        const int vec_ab = ((Ki & 3) == 0 && ((reinterpret_cast<uintptr_t>(Cb) | reinterpret_cast<uintptr_t>(Wi)) & 15) == 0) ? 1 : 0;
        const int vec_c = ((Ni & 3) == 0 && (reinterpret_cast<uintptr_t>(Hn) & 15) == 0) ? 1 : 0;
        const dim3 grid((Ni + GEMM_BN - 1) / GEMM_BN, (Mi + GEMM_BM - 1) / GEMM_BM);
        TORCH_CHECK(grid.y <= 65535, "batch too large for this GEMM grid");
        linear_tanh_kernel<<<grid, 256>>>(Cb, Wi, bic.data_ptr<float>(), Hn, Mi, Ni, Ki, vec_ab, vec_c);
        kb_check_launch();
    }
    }
    if (O > 0) {
    {
        const int vec_ab = ((Ni & 3) == 0 && ((reinterpret_cast<uintptr_t>(Hn) | reinterpret_cast<uintptr_t>(Wo)) & 15) == 0) ? 1 : 0;
        const int vec_c = ((O & 3) == 0 && (reinterpret_cast<uintptr_t>(Op) & 15) == 0) ? 1 : 0;
        const dim3 grid((O + GEMM_BN - 1) / GEMM_BN, (Mi + GEMM_BM - 1) / GEMM_BM);
        TORCH_CHECK(grid.y <= 65535, "batch too large for this GEMM grid");
        linear_plain_kernel<<<grid, 256>>>(Hn, Wo, boc.data_ptr<float>(), Op, Mi, O, Ni, vec_ab, vec_c);
        kb_check_launch();
    }
    }
    return {out, hnew};
}
"""

_ext = load_inline(
    name="kb_l3_33_rnn",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["rnn_cell_forward"],
    verbose=False,
)


batch_size = 256  # the reference's module-level constant, used by its __init__ for the initial hidden state


class ModelNew(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super(ModelNew, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.hidden = torch.randn((batch_size, hidden_size))
        # parameter containers (same names as the reference); never called
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, initial_hidden=None) -> torch.Tensor:
        h = initial_hidden if initial_hidden is not None else self.hidden
        h = h.to(x.device)
        out, new_hidden = _ext.rnn_cell_forward(x, h, self.i2h.weight, self.i2h.bias, self.h2o.weight, self.h2o.bias)
        self.hidden = new_hidden
        return out
