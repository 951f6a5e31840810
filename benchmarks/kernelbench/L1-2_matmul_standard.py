"""KernelBench L1-2: C = A @ B for A [M, K], B [K, N]. Tiled shared-memory SGEMM: 128x128 block tile, BK=16, 256 threads with 8x8 register tiles, double-buffered shared memory, fp32 FMA accumulation, bounds-checked edges."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);
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

// Loads rows [k0, k0 + 16) x cols [n0, n0 + 128) of a row-major [K, N] matrix: this thread's 2 x 4 values.
__device__ __forceinline__ void gemm_load_tile_n(const float* __restrict__ P, int K, int N, int k0, int n0,
                                                 int kr, int nc, int vec, float (&r)[2][4]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int k = k0 + kr + 8 * i;
        const int n = n0 + nc;
        if (vec) {
            if (k < K && n < N) {   // N % 4 == 0, so n < N implies n + 3 < N
                const float4 t = *reinterpret_cast<const float4*>(P + (size_t)k * N + n);
                r[i][0] = t.x; r[i][1] = t.y; r[i][2] = t.z; r[i][3] = t.w;
            } else {
                r[i][0] = 0.0f; r[i][1] = 0.0f; r[i][2] = 0.0f; r[i][3] = 0.0f;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                r[i][j] = (k < K && n + j < N) ? P[(size_t)k * N + n + j] : 0.0f;
        }
    }
}

__device__ __forceinline__ float epi_identity(float v, int col) { return v; }

__global__ void __launch_bounds__(256) sgemm_nn_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ C,
                                            int M, int N, int K, int vec_ab, int vec_b, int vec_c ) {
    __shared__ __align__(16) float As[2][GEMM_BK][GEMM_BM + GEMM_PAD];
    __shared__ __align__(16) float Bs[2][GEMM_BK][GEMM_BN + GEMM_PAD];
    const int tid = threadIdx.x;
    const int tx = tid & 15;
    const int ty = tid >> 4;
    const int m0 = blockIdx.y * GEMM_BM;
    const int n0 = blockIdx.x * GEMM_BN;
    const int lrow = tid >> 2;
    const int lk = (tid & 3) << 2;
    const int kr = tid >> 5;
    const int nc = (tid & 31) << 2;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    float ra[2][4], rb[2][4];
    const int ktiles = (K + GEMM_BK - 1) / GEMM_BK;
    gemm_load_tile_k(A, M, K, m0, 0, lrow, lk, vec_ab, ra);
    gemm_load_tile_n(B, K, N, 0, n0, kr, nc, vec_b, rb);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            As[0][lk + j][lrow + 64 * i] = ra[i][j];
            Bs[0][kr + 8 * i][nc + j] = rb[i][j];
        }
    __syncthreads();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool has_next = kt + 1 < ktiles;
        if (has_next) {
            gemm_load_tile_k(A, M, K, m0, (kt + 1) * GEMM_BK, lrow, lk, vec_ab, ra);
            gemm_load_tile_n(B, K, N, (kt + 1) * GEMM_BK, n0, kr, nc, vec_b, rb);
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
                    Bs[cur ^ 1][kr + 8 * i][nc + j] = rb[i][j];
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

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(B.scalar_type() == torch::kFloat32, "B must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "expected 2-D matrices");
    TORCH_CHECK(A.size(1) == B.size(0), "inner dimensions must match");
    TORCH_CHECK(A.size(0) <= 2147483647LL && A.size(1) <= 2147483647LL && B.size(1) <= 2147483647LL, "sizes too large");
    torch::Tensor Ac = A.contiguous();
    torch::Tensor Bc = B.contiguous();
    const int M = (int)Ac.size(0), K = (int)Ac.size(1), N = (int)Bc.size(1);
    torch::Tensor C = torch::empty({M, N}, Ac.options());
    if (M == 0 || N == 0) return C;
    const float* pa = Ac.data_ptr<float>();
    const float* pb = Bc.data_ptr<float>();
    float* pc = C.data_ptr<float>();
    const int vec_a = ((K & 3) == 0 && (reinterpret_cast<uintptr_t>(pa) & 15) == 0) ? 1 : 0;
    const int vec_b = ((N & 3) == 0 && (reinterpret_cast<uintptr_t>(pb) & 15) == 0) ? 1 : 0;
    const int vec_c = ((N & 3) == 0 && (reinterpret_cast<uintptr_t>(pc) & 15) == 0) ? 1 : 0;
    const dim3 grid((N + GEMM_BN - 1) / GEMM_BN, (M + GEMM_BM - 1) / GEMM_BM);
    TORCH_CHECK(grid.y <= 65535, "M too large for this GEMM grid");
    sgemm_nn_kernel<<<grid, 256>>>(pa, pb, nullptr, pc, M, N, K, vec_a, vec_b, vec_c);
    kb_check_launch();
    return C;
}
"""

_ext = load_inline(
    name="kb_l1_2_matmul",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["matmul_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_forward(A, B)
