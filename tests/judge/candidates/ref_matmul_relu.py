"""Reference: relu(a @ b), a GEMM (the bottleneck) followed by an elementwise op."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(a, b))


def get_inputs():
    return [torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")]


def get_init_inputs():
    return []
