"""KernelBench L1-36: RMSNorm over dim 1: x / sqrt(mean(x^2, dim=1) + eps). One thread per (batch, 4 spatial positions): sum of squares over the features, then the division."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);
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

// x viewed as [B, C, S]; each thread owns 4 consecutive positions s (float4) of one b and loops over C twice.
__global__ void rmsnorm_vec4_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    long long B, long long C, long long S4, float inv_c, float eps) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const long long total = B * S4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const long long b = idx / S4;
        const long long s = idx - b * S4;
        const long long base = b * C * S4 + s;
        float ax = 0.0f, ay = 0.0f, az = 0.0f, aw = 0.0f;
        for (long long c = 0; c < C; ++c) {
            const float4 v = x4[base + c * S4];
            ax += v.x * v.x; ay += v.y * v.y; az += v.z * v.z; aw += v.w * v.w;
        }
        const float rx = sqrtf(ax * inv_c + eps), ry = sqrtf(ay * inv_c + eps);
        const float rz = sqrtf(az * inv_c + eps), rw = sqrtf(aw * inv_c + eps);
        for (long long c = 0; c < C; ++c) {
            const float4 v = x4[base + c * S4];
            float4 o;
            o.x = v.x / rx; o.y = v.y / ry; o.z = v.z / rz; o.w = v.w / rw;
            y4[base + c * S4] = o;
        }
    }
}

__global__ void rmsnorm_scalar_kernel(const float* __restrict__ x, float* __restrict__ y,
                                      long long B, long long C, long long S, float inv_c, float eps) {
    const long long total = B * S;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const long long b = idx / S;
        const long long s = idx - b * S;
        const long long base = b * C * S + s;
        float acc = 0.0f;
        for (long long c = 0; c < C; ++c) {
            const float v = x[base + c * S];
            acc += v * v;
        }
        const float r = sqrtf(acc * inv_c + eps);
        for (long long c = 0; c < C; ++c) y[base + c * S] = x[base + c * S] / r;
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 2, "expected (batch, features, ...)");
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const long long B = xc.size(0);
    const long long C = xc.size(1);
    if (xc.numel() == 0) return y;
    const long long S = xc.numel() / (B * C);
    const float* px = xc.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const float inv_c = static_cast<float>(1.0 / static_cast<double>(C));
    const float epsf = static_cast<float>(eps);
    const int threads = 256;
    const long long max_blocks = 1048576;
    const bool vec = (S & 3) == 0 && ((reinterpret_cast<uintptr_t>(px) | reinterpret_cast<uintptr_t>(py)) & 15) == 0;
    if (vec) {
        const long long S4 = S / 4;
        long long blocks = (B * S4 + threads - 1) / threads;
        if (blocks > max_blocks) blocks = max_blocks;
        rmsnorm_vec4_kernel<<<(unsigned int)blocks, threads>>>(px, py, B, C, S4, inv_c, epsf);
    } else {
        long long blocks = (B * S + threads - 1) / threads;
        if (blocks > max_blocks) blocks = max_blocks;
        rmsnorm_scalar_kernel<<<(unsigned int)blocks, threads>>>(px, py, B, C, S, inv_c, epsf);
    }
    kb_check_launch();
    return y;
}
"""

_ext = load_inline(
    name="kb_l1_36_rmsnorm",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["rmsnorm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, self.eps)
