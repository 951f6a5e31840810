import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear then ReLU: the GEMM is the heavy op, the ReLU a trivial one."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


batch, in_features, out_features = 64, 256, 128


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
