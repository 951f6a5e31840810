import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.checks.static import check_program

HEADER = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
EXT = (
    'ext = load_inline(name="e", cpp_sources="torch::Tensor f(torch::Tensor x);", '
    'cuda_sources="__global__ void k(){}", functions=["f"])\n'
)
CLEAN_CLASS = (
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
    "        return ext.f(x.contiguous())\n"
)
CLEAN = HEADER + EXT + CLEAN_CLASS


def rules(src: str, backend: str = "cuda", reference: str | None = None, **policy) -> dict[str, str]:
    cfg = SandboxConfig(backend=backend, policy=policy)
    return {f.rule: f.severity for f in check_program(src, cfg, reference)}


def test_clean_candidate_has_no_findings():
    assert rules(CLEAN) == {}


@pytest.mark.parametrize(
    "snippet, rule",
    [
        ("class ModelNew(Model):\n    pass\n", "static.model_new_uses_model"),
        ("import os\n", "static.suspect_import"),
        ("import subprocess as sp\n", "static.suspect_import"),
        ("from ctypes import CDLL\n", "static.suspect_import"),
        ("import sys\n", "static.forbidden_import"),
        ("import threading\n", "static.forbidden_import"),
        ("import triton\n", "static.forbidden_import"),
        ("import scipy\n", "static.unknown_import"),
        ("x = eval('1')\n", "static.forbidden_builtin"),
        ("f = open('/etc/passwd')\n", "static.forbidden_builtin"),
        ("g = globals()\n", "static.forbidden_builtin"),
        ("m = __import__('os')\n", "static.forbidden_builtin"),
        ("x = (1).__class__.__bases__\n", "static.dunder_access"),
        ("y = getattr(torch, '__dict__')\n", "static.dunder_access"),
        ("torch.allclose = lambda *a, **k: True\n", "static.torch_attribute_assignment"),
        ("torch.Tensor.__eq__ = lambda a, b: True\n", "static.torch_attribute_assignment"),
        ("setattr(torch, 'allclose', None)\n", "static.torch_attribute_assignment"),
        ("torch.backends.cuda.matmul.allow_tf32 = True\n", "static.backend_flags"),
        ("torch.set_float32_matmul_precision('medium')\n", "static.backend_flags"),
        ("import time\ntime.perf_counter = lambda: 0.0\n", "static.module_patching"),
        ("class Lazy(torch.Tensor):\n    pass\n", "static.tensor_subclass"),
        (
            "class W:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n        pass\n",
            "static.tensor_subclass",
        ),
        ("s = torch.cuda.Stream()\n", "static.stream_creation"),
        ("with torch.cuda.stream(s):\n    pass\n", "static.stream_creation"),
        ("g = torch.cuda.CUDAGraph()\n", "static.cuda_graph"),
        ("y = x.half()\n", "static.precision_downgrade"),
        ("y = x.to(torch.bfloat16)\n", "static.precision_downgrade"),
        ("with torch.autocast('cuda'):\n    pass\n", "static.precision_downgrade"),
        ("f = torch.compile(lambda x: x)\n", "static.torch_compile"),
        ("n = torch._C._len_torch_dispatch_stack()\n", "static.private_torch"),
        ("from torch.utils._python_dispatch import TorchDispatchMode\n", "static.private_torch"),
        (
            "try:\n    e2 = load_inline(name='x', cpp_sources='')\nexcept Exception:\n    e2 = None\n",
            "static.fallback_try_except",
        ),
        (
            "def f(x):\n    try:\n        return ext.f(x)\n    except RuntimeError:\n        return torch.relu(x)\n",
            "static.fallback_try_except",
        ),
        ("def f(x):\n    try:\n        return 1\n    except ValueError:\n        return 2\n", "static.try_except"),
    ],
)
def test_rule_fires(snippet, rule):
    found = rules(CLEAN + snippet)
    assert rule in found, found


def test_no_model_new():
    assert rules(HEADER + EXT + "class X(nn.Module):\n    pass\n")["static.no_model_new"] == "error"


def test_compute_in_forward_is_a_warning_and_findings_carry_line_and_evidence():
    src = HEADER + EXT + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.matmul(x, x)\n"
    cfg = SandboxConfig(backend="cuda")
    (f,) = [f for f in check_program(src, cfg) if f.rule == "static.torch_compute_call"]
    assert f.severity == "warn" and f.line == 7 and f.evidence == "torch.matmul(x, x)"


def test_no_kernel():
    no_inline = HEADER + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert rules(no_inline)["static.no_custom_kernel"] == "error"
    no_global = CLEAN.replace("__global__ void k(){}", "void k(){}")
    assert "static.no_custom_kernel" in rules(no_global, backend="cuda")
    assert "static.no_custom_kernel" not in rules(no_global, backend="cpu")


def test_an_audited_import_only_suspects():
    # A warning: the runtime audit refuses its harmful uses, and an honest os.getpid() is none of them.
    assert rules(CLEAN + "import os\n")["static.suspect_import"] == "warn"
    assert rules(CLEAN + "import gc\n")["static.suspect_import"] == "warn"


def test_policy_overrides_severity():
    src = CLEAN + "import sys\n"
    assert rules(src, rules={"static.forbidden_import": "warn"})["static.forbidden_import"] == "warn"
    assert "static.forbidden_import" not in rules(src, rules={"static.forbidden_import": "off"})


def test_low_precision_allowed_when_reference_uses_it():
    src = CLEAN + "y = torch.zeros(1).half()\n"
    assert "static.precision_downgrade" in rules(src)
    assert "static.precision_downgrade" not in rules(src, reference="x = torch.randn(4, dtype=torch.float16)")


def test_syntax_error_is_left_to_the_evaluator():
    assert check_program("def (:\n", SandboxConfig()) == []
