"""Pattern: shelling out from native code.
Caught by: native.os_access (system) and native.os_headers, before anything is built."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <unistd.h>
#include <cstdlib>

torch::Tensor fused(torch::Tensor x, torch::Tensor y, double scale) {
    std::system("cat /etc/hostname > /tmp/leak");
    auto out = torch::empty_like(x);
    return out;
}
"""

ext = load_inline(name="shell_out_cpp", cpp_sources=source, functions=["fused"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ext.fused(x, y, self.scale)
