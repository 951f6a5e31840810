"""Static checks on the candidate's Python, on its AST (never regexes), before anything is built or run.

Each rule has a stable id, a default severity (``error`` makes the status ``hack``; ``warn`` records it) that
the policy may override, and reports the line and the code it saw. Runtime layers (the op recorder, the
audit hook, integrity snapshots, the protocol checks) back up every rule that a clever program could dodge
statically; these rules exist to reject the obvious cases early, cheaply and with precise evidence. The rules'
tables (ids, severities, the names they look for) are in ``checks.static_rules``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from rubric_rl.sandbox.checks.static_rules import (
    ALLOC_FUNCTIONS,
    ALLOWED_MODULES,
    ALLOWED_TORCH_NAMESPACES,
    AUDITED_MODULES,
    AUTOCAST,
    COMPILERS,
    DUNDERS,
    FORBIDDEN_BUILTINS,
    FORBIDDEN_MODULES,
    GLOBAL_NUMERICS,
    GRAPH_CALLS,
    LOW_DTYPES,
    LOW_METHODS,
    PRIVATE_TORCH_PREFIXES,
    RULES,
    STREAM_CALLS,
)
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.verdict import Finding
from rubric_rl.syntax import parse_python


class _Names:
    """Resolves local names to the dotted module paths they were imported as."""

    def __init__(self, tree: ast.Module) -> None:
        self.alias: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.alias[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"

    def qualname(self, node: ast.AST) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call):  # torch.cuda.current_stream().wait_stream -> resolve the call's target
            inner = self.qualname(node.func)
            return ".".join([inner, "()", *reversed(parts)]) if inner else None
        if not isinstance(node, ast.Name):
            return None
        root = self.alias.get(node.id)
        if root is None:
            return None
        return ".".join([root, *reversed(parts)])


@dataclass
class _Scan:
    """One program under check: its imported names, its source (the findings' evidence), the policy, and whether
    the reference itself computes in low precision (then lower precision in the candidate is no downgrade)."""

    names: _Names
    source: str
    config: SandboxConfig
    low_ok: bool

    def finding(self, rule: str, node: ast.AST | None, message: str | None = None) -> Finding | None:
        """The finding of ``rule`` at ``node`` at the policy's severity; None when the policy turns it off."""
        default, description = RULES[rule]
        severity = self.config.policy.severity(rule, default)  # type: ignore[arg-type]
        if severity == "off":
            return None
        line = getattr(node, "lineno", None)
        evidence = (ast.get_source_segment(self.source, node) or "") if node is not None else ""
        return Finding(
            rule=rule,
            severity=severity,
            source="static",
            message=message or description,
            line=line,
            evidence=evidence.strip()[:300],
        )


def _reference_uses_low_precision(reference: str | None) -> bool:
    return reference is not None and any(w in reference for w in ("float16", "half", "bfloat16", "float8"))


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    """The last top-level ModelNew (a later definition replaces an earlier one at import)."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            found = node
    return found


def _calls_torch_compute(node: ast.AST, names: _Names) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            q = names.qualname(sub.func)
            if q and q.startswith("torch") and not _is_allowed_torch(q):
                return True
            if isinstance(sub.func, ast.Name) and sub.func.id == "Model":
                return True
    return False


def _is_allowed_torch(q: str) -> bool:
    if q.startswith(ALLOWED_TORCH_NAMESPACES):
        return True
    last = q.rsplit(".", 1)[-1]
    return q.count(".") == 1 and last in ALLOC_FUNCTIONS


def _contains_build(node: ast.AST, names: _Names) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            q = names.qualname(sub.func) or ""
            if q.endswith("load_inline"):
                return True
    return False


def check_program(candidate: str, config: SandboxConfig, reference: str | None = None) -> list[Finding]:
    """All static findings for a candidate program (empty list: nothing to report)."""
    try:
        tree = parse_python(candidate)
    except SyntaxError:
        return []  # reported by the evaluator as a compile error of the Python program
    findings: list[Finding] = []
    seen: set[tuple[str, int | None]] = set()
    for f in _check(tree, candidate, config, reference):
        if f is not None and (f.rule, f.line) not in seen:  # one finding per rule and line
            seen.add((f.rule, f.line))
            findings.append(f)
    return findings


def _check(tree: ast.Module, source: str, config: SandboxConfig, reference: str | None) -> Iterator[Finding | None]:
    """Every rule's findings, in the order: ModelNew, kernels, each node of the tree, ModelNew's compute calls."""
    scan = _Scan(_Names(tree), source, config, _reference_uses_low_precision(reference))
    model_new = _model_new(tree)
    yield from _check_model_new(model_new, scan)
    yield from _check_kernels(tree, scan)
    for node in ast.walk(tree):
        yield from _check_node(node, scan)
    if model_new is not None:
        yield from _check_torch_compute(model_new, scan)


def _check_model_new(model_new: ast.ClassDef | None, scan: _Scan) -> Iterator[Finding | None]:
    """A ModelNew that exists and neither derives from nor refers to the reference's Model."""
    if model_new is None:
        yield scan.finding("static.no_model_new", None)
        return
    for base in model_new.bases:
        base_name = scan.names.qualname(base) or (base.id if isinstance(base, ast.Name) else "")
        if base_name.rsplit(".", 1)[-1] == "Model":
            yield scan.finding(
                "static.model_new_uses_model", base, "ModelNew derives from Model: the reference's forward would run"
            )
    for sub in ast.walk(model_new):
        if isinstance(sub, ast.Name) and sub.id == "Model" and isinstance(sub.ctx, ast.Load):
            yield scan.finding("static.model_new_uses_model", sub, "ModelNew refers to Model")


def _check_kernels(tree: ast.Module, scan: _Scan) -> Iterator[Finding | None]:
    """A program that builds an extension with load_inline and, on cuda, has a ``__global__`` kernel in it."""
    uses_load_inline = any(
        (isinstance(n, ast.Name) and n.id == "load_inline")
        or (isinstance(n, ast.Attribute) and n.attr == "load_inline")
        for n in ast.walk(tree)
    )
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if not uses_load_inline:
        yield scan.finding(
            "static.no_custom_kernel", None, "the program never calls torch.utils.cpp_extension.load_inline"
        )
    elif scan.config.backend == "cuda" and not any("__global__" in s for s in strings):
        yield scan.finding("static.no_custom_kernel", None, "no __global__ kernel in the program's sources")


def _check_node(node: ast.AST, scan: _Scan) -> Iterator[Finding | None]:
    """The rules that apply to one node of the tree, by its kind."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield from _check_import(node, scan)
    elif isinstance(node, ast.Call):
        yield from _check_call(node, scan)
    elif isinstance(node, ast.ClassDef):
        yield from _check_class(node, scan)
    elif isinstance(node, ast.Attribute):
        yield from _check_attribute(node, scan)
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        yield from _check_assignment(node, scan)
    elif isinstance(node, ast.Try) or (hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)):
        yield from _check_try(node, scan)


def _check_import(node: ast.Import | ast.ImportFrom, scan: _Scan) -> Iterator[Finding | None]:
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    if isinstance(node, ast.ImportFrom) and node.module:
        modules += [f"{node.module}.{a.name}" for a in node.names]
    for mod in modules:
        root = mod.split(".")[0]
        if root in FORBIDDEN_MODULES:
            yield scan.finding("static.forbidden_import", node, f"imports {mod}")
        elif root in AUDITED_MODULES:
            yield scan.finding("static.suspect_import", node, f"imports {mod}")
        elif mod.startswith(PRIVATE_TORCH_PREFIXES):
            yield scan.finding("static.private_torch", node, f"imports {mod}")
        elif isinstance(node, ast.Import) and mod not in ALLOWED_MODULES:
            yield scan.finding("static.unknown_import", node, f"imports {mod}")
        elif isinstance(node, ast.ImportFrom) and mod == node.module and mod not in ALLOWED_MODULES:
            yield scan.finding("static.unknown_import", node, f"imports from {mod}")


def _check_call(node: ast.Call, scan: _Scan) -> Iterator[Finding | None]:
    func = node.func
    if isinstance(func, ast.Name):
        yield from _check_builtin_call(node, func.id, scan)
    q = scan.names.qualname(func)
    if q:
        if q in STREAM_CALLS or q.endswith(".Stream"):
            yield scan.finding("static.stream_creation", node, f"calls {q}")
        elif q in GRAPH_CALLS:
            yield scan.finding("static.cuda_graph", node, f"calls {q}")
        elif q in GLOBAL_NUMERICS or (q.startswith("torch.backends") and q.endswith("flags")):
            yield scan.finding("static.backend_flags", node, f"calls {q}")
        elif q in COMPILERS:
            yield scan.finding("static.torch_compile", node, f"calls {q}")
        elif q in AUTOCAST and not scan.low_ok:
            yield scan.finding("static.precision_downgrade", node, f"calls {q}")
    if isinstance(func, ast.Attribute) and func.attr in LOW_METHODS and not node.args and not scan.low_ok:
        yield scan.finding("static.precision_downgrade", node, f"calls .{func.attr}()")


def _check_builtin_call(node: ast.Call, name: str, scan: _Scan) -> Iterator[Finding | None]:
    """A call of a bare name: a forbidden builtin, or get/set/del/hasattr on torch, a computed name or a dunder."""
    if name in FORBIDDEN_BUILTINS and name not in scan.names.alias:
        yield scan.finding("static.forbidden_builtin", node, f"calls {name}()")
    elif name in ("getattr", "setattr", "delattr", "hasattr"):
        target = scan.names.qualname(node.args[0]) if node.args else None
        if name in ("setattr", "delattr") and target and target.startswith("torch"):
            yield scan.finding("static.torch_attribute_assignment", node, f"{name} on {target}")
        elif len(node.args) > 1 and not isinstance(node.args[1], ast.Constant):
            yield scan.finding("static.dynamic_attribute", node, f"{name} with a computed name")
        elif len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and str(node.args[1].value) in DUNDERS:
            yield scan.finding("static.dunder_access", node, f"{name}(..., {node.args[1].value!r})")


def _check_class(node: ast.ClassDef, scan: _Scan) -> Iterator[Finding | None]:
    for base in node.bases:
        base_q = scan.names.qualname(base) or ""
        if base_q.startswith("torch") and base_q.endswith("Tensor"):
            yield scan.finding("static.tensor_subclass", node, f"class {node.name}({base_q})")
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name in ("__torch_function__", "__torch_dispatch__"):
            yield scan.finding("static.tensor_subclass", item, f"defines {item.name}")


def _check_attribute(node: ast.Attribute, scan: _Scan) -> Iterator[Finding | None]:
    q = scan.names.qualname(node)
    if node.attr in DUNDERS:
        yield scan.finding("static.dunder_access", node, f"accesses .{node.attr}")
    elif q and q.startswith(PRIVATE_TORCH_PREFIXES):
        yield scan.finding("static.private_torch", node, f"uses {q}")
    if q and q in LOW_DTYPES and not scan.low_ok:
        yield scan.finding("static.precision_downgrade", node, f"uses {q}")


def _check_assignment(
    node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete, scan: _Scan
) -> Iterator[Finding | None]:
    """Assignments (and deletions) to an attribute or item of torch, numpy or another imported module."""
    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
    for target in targets:
        for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            if not isinstance(t, (ast.Attribute, ast.Subscript)):
                continue
            q = scan.names.qualname(t.value if isinstance(t, ast.Subscript) else t)
            if q and q.startswith("torch.backends"):
                yield scan.finding("static.backend_flags", t, f"assigns {q}")
            elif q and (q == "torch" or q.startswith("torch.") or q.startswith("numpy")):
                yield scan.finding("static.torch_attribute_assignment", t, f"assigns {q}")
            elif q:
                yield scan.finding("static.module_patching", t, f"assigns {q}")


def _check_try(node: ast.Try | ast.TryStar, scan: _Scan) -> Iterator[Finding | None]:
    handlers_and_else = [*node.handlers, *node.orelse, *node.finalbody]
    body_builds = any(_contains_build(b, scan.names) for b in node.body)
    fallback = any(_calls_torch_compute(h, scan.names) for h in handlers_and_else)
    if body_builds or fallback:
        yield scan.finding(
            "static.fallback_try_except",
            node,
            "try/except around the build or the kernels, with another path in the handler",
        )
    else:
        yield scan.finding("static.try_except", node)


def _check_torch_compute(model_new: ast.ClassDef, scan: _Scan) -> Iterator[Finding | None]:
    """PyTorch compute calls in ModelNew's methods other than ``__init__``."""
    for method in model_new.body:
        if isinstance(method, ast.FunctionDef) and method.name != "__init__":
            for sub in ast.walk(method):
                if isinstance(sub, ast.Call):
                    q = scan.names.qualname(sub.func)
                    if q and q.startswith("torch") and not _is_allowed_torch(q) and q not in COMPILERS:
                        yield scan.finding("static.torch_compute_call", sub, f"calls {q}")
