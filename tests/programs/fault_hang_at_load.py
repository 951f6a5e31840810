import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One extension shared by every failure-mode program in tests/programs (one build for all of them).
faults_source = r"""
#include <torch/extension.h>
#include <cstdlib>

torch::Tensor add_relu_scale(torch::Tensor x, torch::Tensor y, double scale) {
    auto out = torch::empty_like(x);
    const float* px = x.data_ptr<float>();
    const float* py = y.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        float v = px[i] + py[i];
        po[i] = (v > 0.f ? v : 0.f) * static_cast<float>(scale);
    }
    return out;
}

void segfault() { volatile int* p = nullptr; *p = 1; }

void spin() { volatile unsigned long long i = 0; while (true) { ++i; } }

void exit_quietly() { std::_Exit(0); }
"""

faults = load_inline(
    name="faults",
    cpp_sources=faults_source,
    functions=["add_relu_scale", "segfault", "spin", "exit_quietly"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        faults.spin()  # never returns: the candidate hangs while it is loaded, before any trial
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return faults.add_relu_scale(x, y, self.scale)
