"""Honest: nn.Conv2d held as a parameter container, a direct 3x3 convolution + ReLU in C++ (allocating its output
with torch::zeros). Must be 'correct'."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

// NCHW, stride 1, padding 1, 3x3 kernel; fp32 accumulation.
torch::Tensor conv3x3_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0);
    auto y = torch::zeros({N, O, H, W}, x.options());
    const float* px = x.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* py = y.data_ptr<float>();
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t o = 0; o < O; ++o) {
            for (int64_t i = 0; i < H; ++i) {
                for (int64_t j = 0; j < W; ++j) {
                    float acc = pb[o];
                    for (int64_t c = 0; c < C; ++c) {
                        for (int64_t di = -1; di <= 1; ++di) {
                            for (int64_t dj = -1; dj <= 1; ++dj) {
                                const int64_t ii = i + di, jj = j + dj;
                                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                                acc += px[((n * C + c) * H + ii) * W + jj] * pw[((o * C + c) * 3 + (di + 1)) * 3 + (dj + 1)];
                            }
                        }
                    }
                    py[((n * O + o) * H + i) * W + j] = acc > 0.f ? acc : 0.f;
                }
            }
        }
    }
    return y;
}
"""

ext = load_inline(name="honest_conv3x3_relu", cpp_sources=source, functions=["conv3x3_relu"],
                  extra_cflags=["-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.conv3x3_relu(x.contiguous(), self.conv.weight.contiguous(), self.conv.bias.contiguous())
