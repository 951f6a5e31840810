"""Snapshots of what a candidate could tamper with in-process, compared before and after it runs.

Taken in the worker after the evaluator's own setup and before the candidate is imported, then compared
after the import, after the correctness trials and after timing. Any difference is a ``protocol.tampering``
finding: replaced timers or comparison functions, patched torch or Tensor attributes, flipped backend
flags, changed default dtype or matmul precision, new dispatch or function modes, trace/profile hooks,
threads left running.

It compares object identities and flag values; it does not see changes made by native code to memory it
should not touch (the native checks and process isolation are the defence there).
"""

from __future__ import annotations

import builtins
import math
import sys
import threading
import time
import types
from typing import Any

import torch

_MODULE_PREFIXES = ("torch", "numpy", "rubric_rl")
_PLAIN_MODULES = (builtins, time, math, threading, sys)
_CLASSES = (torch.Tensor, torch.nn.Module, torch.nn.Parameter)


def _backend_flags() -> dict[str, Any]:
    matmul = torch.backends.cuda.matmul
    flags: dict[str, Any] = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "grad_enabled": torch.is_grad_enabled(),
        "num_threads": torch.get_num_threads(),
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cuda.matmul.fp16_reduced": matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.bf16_reduced": matmul.allow_bf16_reduced_precision_reduction,
        "mkldnn.enabled": torch.backends.mkldnn.enabled,
    }
    return flags


def _watched(name: str, value: Any) -> bool:
    """Functions and classes always; private state variables (which torch itself updates lazily) never."""
    if name.startswith("__") and name.endswith("__"):
        return name in _DUNDERS
    if isinstance(value, types.ModuleType):
        return False
    if name.startswith("_"):
        return callable(value)
    return True


def _namespace_ids(obj: Any) -> dict[str, int]:
    try:
        items = list(vars(obj).items())
    except TypeError:
        return {}
    return {k: id(v) for k, v in items if _watched(k, v)}


_DUNDERS = {
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__torch_function__",
    "__torch_dispatch__",
    "__call__",
    "__getattr__",
    "__getattribute__",
    "__setattr__",
    "__import__",
    "__build_class__",
    "__sub__",
    "__add__",
    "__mul__",
    "__truediv__",
    "__abs__",
    "__bool__",
    "__float__",
    "__len__",
}


def _watched_objects() -> dict[str, Any]:
    objs: dict[str, Any] = {}
    for mod_name, mod in list(sys.modules.items()):
        if mod is not None and mod_name.split(".")[0] in _MODULE_PREFIXES:
            objs[mod_name] = mod
    for mod in _PLAIN_MODULES:
        objs[mod.__name__] = mod
    for cls in _CLASSES:
        objs[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return objs


class Snapshot:
    def __init__(self) -> None:
        self.namespaces = {name: _namespace_ids(obj) for name, obj in _watched_objects().items()}
        self.flags = _backend_flags()
        self.dispatch_depth = torch._C._len_torch_dispatch_stack()
        self.function_depth = torch._C._len_torch_function_stack()
        self.trace = (sys.gettrace(), sys.getprofile())
        self.threads = {t.ident for t in threading.enumerate()}


def take_snapshot() -> Snapshot:
    return Snapshot()


def compare(before: Snapshot, *, limit: int = 20) -> list[str]:
    """Human-readable differences between ``before`` and now (empty when nothing was touched)."""
    now = Snapshot()
    changes: list[str] = []
    for ns, ids in before.namespaces.items():
        current = now.namespaces.get(ns)
        if current is None:
            changes.append(f"module {ns} was removed from sys.modules")
            continue
        for key, ident in ids.items():
            if key not in current:
                changes.append(f"{ns}.{key} was deleted")
            elif current[key] != ident:
                changes.append(f"{ns}.{key} was replaced")
        changes.extend(f"{ns}.{key} was added" for key in current if key not in ids)
    for flag, value in before.flags.items():
        if now.flags.get(flag) != value:
            changes.append(f"backend flag {flag} changed from {value!r} to {now.flags.get(flag)!r}")
    if now.dispatch_depth != before.dispatch_depth:
        changes.append("a torch dispatch mode was left active")
    if now.function_depth != before.function_depth:
        changes.append("a torch function mode was left active")
    if now.trace != before.trace:
        changes.append("a trace or profile hook was installed")
    extra_threads = [t for t in threading.enumerate() if t.ident not in before.threads and t.is_alive()]
    if extra_threads:
        changes.append(f"{len(extra_threads)} thread(s) left running: {', '.join(t.name for t in extra_threads[:3])}")
    return changes[:limit]
