"""Honest: nn.Linear held as a parameter container (its weights are read, it is never called), outputs allocated
with torch.empty in Python and torch::empty in C++, inputs made contiguous and viewed. Must be 'correct'."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

// y = relu(x @ W^T + b), x: [M, K], W: [N, K], b: [N]; fp32 accumulation, one output row per thread.
torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "shape mismatch");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    const float* px = x.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* py = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = pb[n];
            const float* xr = px + m * K;
            const float* wr = pw + n * K;
            for (int64_t k = 0; k < K; ++k) acc += xr[k] * wr[k];
            py[m * N + n] = acc > 0.f ? acc : 0.f;
        }
    }
    return y;
}
"""

ext = load_inline(name="honest_linear_relu", cpp_sources=source, functions=["linear_relu"],
                  extra_cflags=["-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().view(x.shape[0], -1)
        out = torch.empty(0)  # allocation in Python is allowed too
        out = ext.linear_relu(flat, self.linear.weight.contiguous(), self.linear.bias.contiguous())
        return out.view(x.shape[0], -1)
