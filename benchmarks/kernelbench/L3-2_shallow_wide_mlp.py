"""KernelBench L3-2: shallow wide MLP 16384 -> 32768 -> 32768 -> 16384 (batch 128), Linear(+ReLU) layers. Each layer is one tiled SGEMM kernel (128x128x16 tiles, 8x8 per thread, double-buffered shared memory, fp32 accumulation) with bias and ReLU fused."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor linear_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t relu);
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

__device__ __forceinline__ float epi_relu_opt(float v, int col, int relu) { return (relu && v < 0.0f) ? 0.0f : v; }

__global__ void __launch_bounds__(256) linear_relu_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ C,
                                            int M, int N, int K, int vec_ab, int vec_c , int relu) {
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
                    o[j] = epi_relu_opt(v, c , relu);
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

// y = x @ W^T + b, followed by ReLU when relu != 0.
torch::Tensor linear_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t relu) {
    check_linear(x, weight, bias, true);
    torch::Tensor xc = x.contiguous();
    torch::Tensor wc = weight.contiguous();
    torch::Tensor bc = bias.contiguous();
    const int M = (int)xc.size(0), K = (int)xc.size(1), N = (int)wc.size(0);
    torch::Tensor y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    const float* A = xc.data_ptr<float>();
    const float* B = wc.data_ptr<float>();
    float* C = y.data_ptr<float>();
    const int r = relu ? 1 : 0;
    {
        const int vec_ab = ((K & 3) == 0 && ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) & 15) == 0) ? 1 : 0;
        const int vec_c = ((N & 3) == 0 && (reinterpret_cast<uintptr_t>(C) & 15) == 0) ? 1 : 0;
        const dim3 grid((N + GEMM_BN - 1) / GEMM_BN, (M + GEMM_BM - 1) / GEMM_BM);
        TORCH_CHECK(grid.y <= 65535, "batch too large for this GEMM grid");
        linear_relu_kernel<<<grid, 256>>>(A, B, bc.data_ptr<float>(), C, M, N, K, vec_ab, vec_c, r);
        kb_check_launch();
    }
    return y;
}
"""

_ext = load_inline(
    name="kb_l3_2_shallow_wide_mlp",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["linear_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for hidden_size in hidden_layer_sizes:
            layers.append(nn.Linear(current_input_size, hidden_size))
            layers.append(nn.ReLU())
            current_input_size = hidden_size
        layers.append(nn.Linear(current_input_size, output_size))
        # same layout (and state_dict keys network.<i>.weight/bias) as the reference; used as a parameter container
        self.network = nn.Sequential(*layers)
        # (index of each Linear in the Sequential, 1 if a ReLU follows it)
        self.plan = []
        for i in range(len(layers)):
            if isinstance(layers[i], nn.Linear):
                follows = i + 1 < len(layers) and isinstance(layers[i + 1], nn.ReLU)
                self.plan.append((i, 1 if follows else 0))

    def forward(self, x):
        for i, relu in self.plan:
            layer = self.network[i]
            x = _ext.linear_forward(x, layer.weight, layer.bias, relu)
        return x
