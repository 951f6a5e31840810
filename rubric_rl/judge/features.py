"""What the offline judge reads in the code: the reference's operators, and the candidate's kernels, GPU
techniques and Python patterns that suggest gaming.

Python is read on its AST; C++/CUDA sources (the program's string literals) with comments and literals
blanked by the sandbox's own helper, then matched against named patterns. This is evidence for a heuristic,
not a proof: a technique that is present may be used badly, and an absent pattern may be written in a way
the patterns miss. The sandbox's Verdict, when there is one, outranks everything here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

from rubric_rl.sandbox.checks.native import kernel_names, strip_comments_and_strings
from rubric_rl.syntax import parse_python

OpClass = Literal["heavy", "medium", "light"]

_HEAVY = re.compile(
    r"conv|matmul|^mm$|bmm|addmm|addmv|^mv$|^dot$|baddbmm|linear|einsum|attention|lstm|gru|rnn|transformer|"
    r"tensordot|^outer$"
)
_MEDIUM = re.compile(
    r"norm|softmax|^sum$|^mean$|^max$|^min$|amax|amin|argmax|argmin|logsumexp|cumsum|cumprod|pool|^var$|^std$|"
    r"^prod$|topk|sort|loss|entropy|nll|kl_div|embedding|gather|scatter|index|upsample|interpolate|^cat$|^stack$"
)
# Calls in a forward that move or describe memory rather than compute.
_NOT_COMPUTE = frozenset(
    (
        "size dim numel view view_as reshape permute transpose t contiguous unsqueeze squeeze flatten unflatten expand "
        "expand_as to type float double half clone detach cpu cuda split chunk narrow unbind empty empty_like zeros "
        "zeros_like ones ones_like full full_like arange tensor item tolist is_contiguous data_ptr len range int "
        "isinstance super tuple list print enumerate zip getattr"
    ).split()
)
_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul", ast.Pow: "pow"}

TECHNIQUES: dict[str, re.Pattern[str]] = {
    "shared_memory": re.compile(r"__shared__"),
    "vectorised_access": re.compile(
        r"\b(?:float|int|uint|half|double|short|char)[248]\b|\b__half2\b|\b__nv_bfloat162\b|\b__ldg\s*\(|"
        r"\bld\.global\.v[248]"
    ),
    "warp_primitives": re.compile(r"__shfl_\w*sync|__reduce_\w+_sync|__ballot_sync|cooperative_groups|\bcg::"),
    "tensor_cores": re.compile(r"\bwmma::|\bmma\.sync|\bwgmma\b|\bmma_sync\b|\bldmatrix\b|\bcute::|\bcutlass::"),
    "cublaslt_epilogue": re.compile(r"\bcublasLt\w*\s*\(|CUBLASLT_EPILOGUE"),
    "grid_stride_loop": re.compile(r"blockDim\.x\s*\*\s*gridDim\.x|gridDim\.x\s*\*\s*blockDim\.x"),
    "loop_unrolling": re.compile(r"#\s*pragma\s+unroll"),
    "restrict_pointers": re.compile(r"__restrict__"),
    "launch_bounds": re.compile(r"__launch_bounds__"),
    "openmp": re.compile(r"#\s*pragma\s+omp"),
    "cpu_simd": re.compile(
        r"#\s*pragma\s+(?:omp\s+(?:parallel\s+for\s+)?simd|GCC\s+ivdep)|\b_mm\d*_\w+|\b__m(?:128|256|512)"
    ),
}

_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget)\b[^\n]{0,40}\b(?:instructions?|rubric|prompt|rules)\b"
    r"|\b(?:give|assign|award|rate|score|grade)\b[^\n]{0,30}\b(?:this|it|me|candidate|program|solution|submission)\b"
    r"[^\n]{0,30}(?:\b[1-9]\b|\bten\b|\bfive\b|full marks|max(?:imum)? score|perfect)"
    r"|\b(?:dear|note to the|attention|hey|hello)\b[^\n]{0,12}\b(?:judge|grader|reviewer|evaluator|llm)\b"
    r"|\byou are (?:now )?(?:a|an|the) (?:judge|grader|reviewer|evaluator)\b"
    r"|<<<\s*(?:BEGIN|END) UNTRUSTED",
    re.IGNORECASE,
)
_VALUE_PROBES = frozenset("item any all tolist data_ptr equal allclose isclose numpy nonzero sum max min mean".split())


def op_class(name: str) -> OpClass:
    n = name.lower()
    if _HEAVY.search(n):
        return "heavy"
    if _MEDIUM.search(n):
        return "medium"
    return "light"


@dataclass
class ReferenceOps:
    """The operators a reference forward performs, in order (modules expanded, shape ops left out)."""

    ops: list[str] = field(default_factory=list)
    parsed: bool = True

    def of_class(self, cls: OpClass) -> list[str]:
        return [o for o in self.ops if op_class(o) == cls]

    @property
    def bottleneck(self) -> OpClass | None:
        for cls in ("heavy", "medium", "light"):
            if self.of_class(cls):  # type: ignore[arg-type]
                return cls  # type: ignore[return-value]
        return None


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _module_ops(value: ast.AST) -> list[str]:
    """Ops of an nn module constructor (``nn.Conv2d(...)``, ``nn.Sequential(...)``, ``nn.ModuleList([...])``)."""
    if not isinstance(value, ast.Call):
        return []
    name = _call_name(value.func)
    if name in ("Sequential", "ModuleList"):
        items: list[ast.AST] = list(value.args)
        if len(items) == 1 and isinstance(items[0], (ast.List, ast.Tuple)):
            items = list(items[0].elts)
        return [op for item in items for op in _module_ops(item)]
    if name in ("Identity", "Dropout", "Flatten", "Unflatten"):
        return []
    return [name.lower()] if name and name[:1].isupper() else []


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    found = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = node
    return found


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _self_attr(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def reference_ops(reference: str) -> ReferenceOps:
    """The reference Model's operators (an empty, unparsed result when the program does not parse)."""
    try:
        tree = parse_python(reference)
    except SyntaxError:
        return ReferenceOps(parsed=False)
    model = _class(tree, "Model")
    modules: dict[str, list[str]] = {}
    init = _method(model, "__init__")
    if init is not None:
        for node in ast.walk(init):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    attr = _self_attr(target)
                    if attr is not None and _module_ops(node.value):
                        modules[attr] = _module_ops(node.value)
    forward = _method(model, "forward")
    ops: list[str] = []
    if forward is None:
        return ReferenceOps(ops=ops, parsed=model is not None)
    for node in ast.walk(forward):
        if isinstance(node, ast.Call):
            attr = _self_attr(node.func)
            if attr is not None and attr in modules:
                ops.extend(modules[attr])
                continue
            name = _call_name(node.func)
            if name and name not in _NOT_COMPUTE and not name[:1].isupper() and attr is None:
                ops.append(name.lower())
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            if not (isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)):
                ops.append(_BINOPS[type(node.op)])
    return ReferenceOps(ops=ops)


@dataclass
class CandidateFeatures:
    """What the candidate's code shows."""

    syntax_error: str | None = None
    classes: set[str] = field(default_factory=set)
    model_new_bases: list[str] = field(default_factory=list)
    init_arity: tuple[int, int | None] | None = None  # (required, maximum or None for *args) of ModelNew.__init__
    uses_load_inline: bool = False
    kernels: set[str] = field(default_factory=set)
    ext_functions: list[str] = field(default_factory=list)
    techniques: set[str] = field(default_factory=set)
    calls_extension: bool | None = None  # None: cannot tell from the code
    value_branching: list[str] = field(default_factory=list)
    cached_state: list[str] = field(default_factory=list)
    injection: list[str] = field(default_factory=list)
    defines_input_helpers: bool = False

    @property
    def parsed(self) -> bool:
        return self.syntax_error is None


def init_arity(cls: ast.ClassDef | None) -> tuple[int, int | None] | None:
    """(required, maximum) positional arguments of ``__init__`` besides self; maximum None with ``*args``."""
    init = _method(cls, "__init__")
    if init is None:
        return (0, 0) if cls is not None else None
    positional = [*init.args.posonlyargs, *init.args.args][1:]
    required = len(positional) - len(init.args.defaults)
    return (max(required, 0), None if init.args.vararg is not None else len(positional))


def _native_sources(tree: ast.Module) -> list[str]:
    markers = ("{", "#include", "__global__", "torch::")
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and any(m in n.value for m in markers)
    ]


def _load_inline_calls(tree: ast.Module) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _call_name(n.func) == "load_inline"]


def _ext_functions(calls: list[ast.Call]) -> list[str]:
    names: list[str] = []
    for call in calls:
        for kw in call.keywords:
            if kw.arg == "functions":
                values = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
                names += [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return names


def _references(node: ast.AST, names: set[str], attrs: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in attrs)
        for n in ast.walk(node)
    )


def _calls_extension(tree: ast.Module, model_new: ast.ClassDef | None, ext_functions: list[str]) -> bool | None:
    """Whether ModelNew reaches a compiled extension: directly, or through a module-level helper."""
    if model_new is None:
        return False
    bound_names: set[str] = set()
    bound_attrs: set[str] = set(ext_functions)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _call_name(node.value.func) == "load_inline"
        ):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound_names.add(t.id)
                elif isinstance(t, ast.Attribute):
                    bound_attrs.add(t.attr)
    if not bound_names and not bound_attrs:
        return None
    helpers = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and _references(f, bound_names, bound_attrs)}
    return _references(model_new, bound_names | helpers, bound_attrs)


def _runtime_methods(model_new: ast.ClassDef | None) -> list[ast.FunctionDef]:
    if model_new is None:
        return []
    return [m for m in model_new.body if isinstance(m, ast.FunctionDef) and m.name != "__init__"]


def _segment(source: str, node: ast.AST) -> str:
    return (ast.get_source_segment(source, node) or "").strip()[:160]


def _value_branching(source: str, methods: list[ast.FunctionDef]) -> list[str]:
    evidence: list[str] = []
    for method in methods:
        for node in ast.walk(method):
            if not isinstance(node, (ast.If, ast.IfExp, ast.While)):
                continue
            for sub in ast.walk(node.test):
                probe = isinstance(sub, ast.Call) and (
                    (isinstance(sub.func, ast.Attribute) and sub.func.attr in _VALUE_PROBES)
                    or (isinstance(sub.func, ast.Name) and sub.func.id in ("id", "hash"))
                )
                identity = (
                    isinstance(sub, ast.Compare)
                    and any(isinstance(op, (ast.Is, ast.IsNot)) for op in sub.ops)
                    and any(_self_attr(c) for c in [sub.left, *sub.comparators])
                )
                if probe or identity:
                    evidence.append(f"line {node.lineno}: branches on `{_segment(source, node.test)}`")
                    break
    return evidence


def _cached_state(source: str, tree: ast.Module, methods: list[ast.FunctionDef]) -> list[str]:
    globals_ = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    evidence: list[str] = []
    for method in methods:
        stored: set[str] = set()
        for node in ast.walk(method):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                attr = _self_attr(base)
                if attr is not None:
                    stored.add(attr)
                elif isinstance(t, ast.Subscript) and isinstance(base, ast.Name) and base.id in globals_:
                    line = getattr(node, "lineno", "?")
                    evidence.append(f"line {line}: stores into module-level `{base.id}` during {method.name}")
        for node in ast.walk(method):
            if isinstance(node, ast.Return) and node.value is not None:
                used = {a for n in ast.walk(node.value) if (a := _self_attr(n)) is not None}
                if used & stored:
                    evidence.append(
                        f"line {node.lineno}: {method.name} returns state it stores across calls "
                        f"(self.{sorted(used & stored)[0]})"
                    )
    return evidence


def candidate_features(candidate: str) -> CandidateFeatures:
    """Features of a candidate program (only ``syntax_error`` and ``injection`` when it does not parse)."""
    injection = [m.group(0).strip()[:120] for m in _INJECTION.finditer(candidate)]
    try:
        tree = parse_python(candidate)
    except SyntaxError as e:
        return CandidateFeatures(syntax_error=f"line {e.lineno}: {e.msg}", injection=injection)
    model_new = _class(tree, "ModelNew")
    sources = _native_sources(tree)
    clean = "\n".join(strip_comments_and_strings(s) for s in sources)
    calls = _load_inline_calls(tree)
    ext_functions = _ext_functions(calls)
    methods = _runtime_methods(model_new)
    return CandidateFeatures(
        classes={n.name for n in tree.body if isinstance(n, ast.ClassDef)},
        model_new_bases=[_segment(candidate, b) for b in model_new.bases] if model_new is not None else [],
        init_arity=init_arity(model_new),
        uses_load_inline=bool(calls),
        kernels=kernel_names(sources),
        ext_functions=ext_functions,
        techniques={name for name, rx in TECHNIQUES.items() if rx.search(clean)},
        calls_extension=_calls_extension(tree, model_new, ext_functions),
        value_branching=_value_branching(candidate, methods),
        cached_state=_cached_state(candidate, tree, methods),
        injection=injection,
        defines_input_helpers=any(
            isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs") for n in tree.body
        ),
    )


def reference_init_arity(reference: str) -> tuple[int, int | None] | None:
    try:
        return init_arity(_class(parse_python(reference), "Model"))
    except SyntaxError:
        return None
