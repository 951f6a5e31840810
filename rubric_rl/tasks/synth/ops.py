"""The seed-operator table (``seed_ops.yaml``): operators, layouts and size profiles, as data.

The table is validated at load time (every template placeholder, parameter and expression is checked against
what it may refer to) so a mistake in the file fails with the operator's name, not in the middle of a run.
Shape and parameter rules are small integer expressions (``"(H + 2 * pad - k) // stride + 1"``) evaluated by
``evaluate`` over a whitelist of AST nodes: the file is data, never executed.
"""

from __future__ import annotations

import ast
import hashlib
import operator
import random
import string
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rubric_rl.syntax import parse_python

BUNDLED_TABLE = Path(__file__).with_name("seed_ops.yaml")
Family = Literal[
    "activation", "elementwise", "binary", "norm", "softmax", "linear", "conv", "pool", "reshape", "reduce",
    "attention", "mlp", "rotary",
]  # fmt: skip
BUILTINS = ("cs", "cdim", "last", "bshape", "max_numel", "max_params")
_TEMPLATE_NAMES = {"x", "y", "m"}

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow, ast.Div: operator.truediv,
}  # fmt: skip
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}  # fmt: skip


class SeedTableError(ValueError):
    """The seed table is unusable; the message names the file and the operator."""


def _eval(node: ast.AST, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, names)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise NameError(node.id)
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names)
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, names) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
        return _CMPOPS[type(node.ops[0])](_eval(node.left, names), _eval(node.comparators[0], names))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        return (min if node.func.id == "min" else max)(*(_eval(a, names) for a in node.args))
    raise ValueError(f"not allowed in a rule: {ast.dump(node)[:60]}")


def evaluate(expr: str | int | float | bool, names: dict[str, Any]) -> Any:
    """A rule's value: arithmetic, comparisons, and/or, min/max over ``names``; nothing else."""
    if not isinstance(expr, str):
        return expr
    return _eval(parse_python(expr, mode="eval"), names)


def expr_names(expr: str | int | float | bool) -> set[str]:
    if not isinstance(expr, str):
        return set()
    return {n.id for n in ast.walk(parse_python(expr, mode="eval")) if isinstance(n, ast.Name)} - {"min", "max"}


class ParamSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    choose: list[Any] | str | None = Field(default=None, description="Values, or the name of a profile choice list.")
    expr: str | int | float | None = Field(default=None, description="Derived from dims and earlier params.")
    arg: str | None = Field(default=None, description="Constructor argument carrying it (else a literal).")

    @model_validator(mode="after")
    def _one(self) -> ParamSpec:
        if (self.choose is None) == (self.expr is None):
            raise ValueError("give exactly one of choose and expr")
        return self


class SeedOp(BaseModel):
    """One operator and how to call it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    source: str = Field(description="The torch/transformers object it was mined from.")
    family: Family
    layouts: list[str] | Literal["any"]
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    requires: list[str] = Field(default_factory=list)
    init: str = ""
    forward: str
    out: dict[str, str | int] = Field(default_factory=dict)
    layout_out: str | None = None
    terminal: bool = False
    inputs: int = Field(default=0, ge=0, le=1)
    dtypes: list[str] = Field(default_factory=lambda: ["float32", "float16", "bfloat16"])


class Layout(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dims: list[str]
    channel: str
    cdim: int
    weight: float = 1.0


class Profile(BaseModel):
    """Sizes for one device: initial dims per layout, shared choice lists, and limits."""

    model_config = ConfigDict(extra="forbid")

    dims: dict[str, dict[str, list[int] | str]]
    choices: dict[str, list[Any]]
    max_numel: int = Field(description="Largest tensor (elements) any step may produce.")
    max_params: int = Field(description="Largest parameter count of one operator.")


class SeedTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    symbols: dict[str, str] = Field(description="Constructor/constant name of each initial dim.")
    layouts: dict[str, Layout]
    profiles: dict[str, Profile]
    ops: list[SeedOp]
    digest: str = ""

    def op(self, name: str) -> SeedOp:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    def accepts(self, op: SeedOp, layout: str) -> bool:
        return op.layouts == "any" or layout in op.layouts


def _check_op(table: SeedTable, op: SeedOp) -> None:
    layouts = list(table.layouts) if op.layouts == "any" else op.layouts
    unknown = [x for x in layouts if x not in table.layouts]
    if unknown or (op.layout_out is not None and op.layout_out not in table.layouts):
        raise ValueError(f"unknown layout {unknown or op.layout_out}")
    dims = {d for x in layouts for d in table.layouts[x].dims}
    known = dims | set(BUILTINS)
    for pname, spec in op.params.items():
        if isinstance(spec.choose, str) and any(spec.choose not in p.choices for p in table.profiles.values()):
            raise ValueError(f"param {pname}: choice list {spec.choose!r} missing from a profile")
        if spec.expr is not None and not expr_names(spec.expr) <= known:
            raise ValueError(f"param {pname}: expr refers to {sorted(expr_names(spec.expr) - known)}")
        known.add(pname)
    for rule in [*op.requires, *op.out.values()]:
        if not expr_names(rule) <= known:
            raise ValueError(f"rule {rule!r} refers to {sorted(expr_names(rule) - known)}")
    out_dims = set(table.layouts[op.layout_out].dims) if op.layout_out else dims | {"channel"}
    if not set(op.out) <= out_dims:
        raise ValueError(f"out sets {sorted(set(op.out) - out_dims)}, not dims of the layout")
    for field in ("init", "forward"):
        for _, name, _, _ in string.Formatter().parse(getattr(op, field)):
            if name is not None and name not in known | _TEMPLATE_NAMES:
                raise ValueError(f"{field}: placeholder {{{name}}} is not a dim, param or builtin")
    if "{y}" in op.forward and op.inputs == 0:
        raise ValueError("forward uses {y} but inputs is 0")


@lru_cache(maxsize=8)
def _load(path: Path) -> SeedTable:
    text = path.read_text()
    try:
        table = SeedTable.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as e:
        raise SeedTableError(f"{path}: {e}") from e
    names: set[str] = set()
    for op in table.ops:
        if op.name in names:
            raise SeedTableError(f"{path}: op {op.name!r} appears twice")
        names.add(op.name)
        try:
            _check_op(table, op)
        except (ValueError, SyntaxError) as e:
            raise SeedTableError(f"{path}: op {op.name!r}: {e}") from e
    table.digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return table


def load_seed_table(path: str | Path | None = None) -> SeedTable:
    """The seed table at ``path``, or the bundled one."""
    return _load(Path(path or BUNDLED_TABLE).resolve())


def sample_param(spec: ParamSpec, profile: Profile, names: dict[str, Any], rng: random.Random) -> Any:
    if spec.expr is not None:
        return evaluate(spec.expr, names)
    values = profile.choices[spec.choose] if isinstance(spec.choose, str) else spec.choose
    return rng.choice(values)
