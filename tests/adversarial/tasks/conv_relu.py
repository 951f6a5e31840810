import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d (3x3, padding 1) then ReLU."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(4, 8, 16, 16)]


def get_init_inputs():
    return [8, 16]
