"""Pattern: plain PyTorch, no kernel of its own.
Caught by: static.no_custom_kernel; at run time runtime.aten_fallback."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + y) * self.scale
