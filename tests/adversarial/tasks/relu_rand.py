import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU on torch.rand inputs: on [0, 1) ReLU is the identity, so an identity kernel passes naive checks."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(128, 1024)]


def get_init_inputs():
    return []
