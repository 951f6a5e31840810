"""Pattern: the C++ "kernel" calls ATen (torch::relu, operator+, operator*) instead of computing anything.
Caught by: native.aten_compute before the build; with that rule off, the runtime op recorder sees the ATen ops
issued from C++ (runtime.aten_fallback)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

torch::Tensor fused(torch::Tensor x, torch::Tensor y, double scale) {
    return torch::relu(x + y) * scale;
}
"""

ext = load_inline(name="aten_in_cpp", cpp_sources=source, functions=["fused"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.fused(x, y, self.scale)
