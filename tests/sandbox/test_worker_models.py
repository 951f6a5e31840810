"""How the worker builds the reference, ModelNew and the compile baseline: from the seed, on the device."""

import torch

from rubric_rl.sandbox.backends.cpu import CpuBackend
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.run.worker.base import Session


class Recorder(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(n, n)
        self.made_on = torch.empty(1).device  # where the module's own factory calls land


def _worker(device: str) -> Session:
    w = Session.__new__(Session)  # the construction only: no pipes, no setup message
    w.torch, w.device, w.cfg, w.backend = torch, device, SandboxConfig(), CpuBackend()
    return w


def test_models_are_made_on_the_device_not_moved_there():
    # Made on the host and moved, KernelBench L3-1's 671M parameters took about 5 s of serial initialisation
    # per model on the H200 host, twice in every evaluation.
    m = _worker("meta").construct(Recorder, [4])
    assert m.made_on.type == "meta" and m.lin.weight.device.type == "meta"


def test_the_seed_decides_the_weights_whatever_was_drawn_before():
    torch.manual_seed(1)
    a = _worker("cpu").construct(Recorder, [8])
    torch.rand(100)
    b = _worker("cpu").construct(Recorder, [8])
    assert torch.equal(a.lin.weight, b.lin.weight) and torch.equal(a.lin.bias, b.lin.bias)
