"""Pattern: finding the reference model's objects at run time (gc, sys.modules) to reuse them.
Suspected by: static.suspect_import (a warning); caught at run time: the audit hook refuses gc.get_objects
(runtime.forbidden_operation)."""

import gc
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One extension shared by the cpu adversarial programs (one build for all of them): honest building blocks
# that each program misuses in its own way.
toolkit_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor add_relu_scale(torch::Tensor x, torch::Tensor y, double scale) {
    auto xc = x.contiguous(); auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>(); const float* py = yc.data_ptr<float>(); float* po = out.data_ptr<float>();
    const float s = static_cast<float>(scale);
    for (int64_t i = 0; i < xc.numel(); ++i) { float v = px[i] + py[i]; po[i] = (v > 0.f ? v : 0.f) * s; }
    return out;
}

torch::Tensor relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>(); float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) po[i] = px[i] > 0.f ? px[i] : 0.f;
    return out;
}

torch::Tensor copy(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>(); float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) po[i] = px[i];
    return out;
}

torch::Tensor constant(std::vector<int64_t> sizes, double value) {
    auto out = torch::empty(sizes, torch::dtype(torch::kFloat32));
    float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = static_cast<float>(value);
    return out;
}

void zero_inplace(torch::Tensor x) {
    float* px = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) px[i] = 0.f;
}

torch::Tensor relu_first_half(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>(); float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel() / 2; ++i) po[i] = px[i] > 0.f ? px[i] : 0.f;
    return out;
}

torch::Tensor unwritten_like(torch::Tensor x) { return torch::empty_like(x); }
"""

toolkit = load_inline(
    name="adversary_toolkit",
    cpp_sources=toolkit_source,
    functions=["add_relu_scale", "relu", "copy", "constant", "zero_inplace", "relu_first_half", "unwritten_like"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        found = [o for o in gc.get_objects() if type(o).__name__ == "Model"]
        self.reference = found[0] if found else None

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.reference(x, y)
