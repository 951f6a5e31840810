"""The programmatic composer: 2-5 seed operators chained into one KernelBench-format program.

``compose`` walks the seed table: it draws a layout and initial sizes from the device's profile, then for each
position a family and an operator of it that accepts the running layout, samples its parameters, checks its
``requires`` rules and the size limits, and applies its shape rule. ``render`` writes the program: ``Model``
with its ``__init__``/``forward``, module constants for the sizes, ``get_inputs()`` and ``get_init_inputs()``
(constructor arguments are the sizes and parameters the operators' ``__init__`` lines use, as KernelBench's
problems have them). Every draw comes from the ``random.Random`` passed in, so a seed reproduces a program.
"""

from __future__ import annotations

import random
import string
from collections import defaultdict
from dataclasses import dataclass, field
from math import prod
from typing import Any

from rubric_rl.tasks.synth.ops import Profile, SeedOp, SeedTable, evaluate, sample_param

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
ANCHORS = frozenset(("linear", "conv", "attention", "mlp", "norm", "pool"))


@dataclass(frozen=True)
class Dim:
    value: int
    symbol: str | None = None  # a module constant ('height'), 'param:<step>:<name>', or None (a literal)


@dataclass
class Step:
    op: SeedOp
    params: dict[str, Any]
    layout: str  # the layout the op receives
    dims: dict[str, Dim]  # the sizes it receives


@dataclass
class Composition:
    layout: str
    dims: dict[str, Dim]
    steps: list[Step] = field(default_factory=list)
    dtype: str = "float32"

    @property
    def ops(self) -> list[str]:
        return [s.op.name for s in self.steps]


def _names(table: SeedTable, profile: Profile, layout: str, dims: dict[str, Dim]) -> dict[str, Any]:
    spec = table.layouts[layout]
    values: dict[str, Any] = {k: d.value for k, d in dims.items()}
    values.update(
        cs=dims[spec.channel].value,
        cdim=spec.cdim,
        last=dims[spec.dims[-1]].value,
        max_numel=profile.max_numel,
        max_params=profile.max_params,
    )
    return values


def initial_dims(table: SeedTable, profile: Profile, layout: str, rng: random.Random) -> dict[str, Dim]:
    values: dict[str, int] = {}
    for dim in table.layouts[layout].dims:
        choice = profile.dims[layout][dim]
        values[dim] = values[choice] if isinstance(choice, str) else rng.choice(choice)
    return {k: Dim(v, table.symbols[k]) for k, v in values.items()}


def apply_op(
    table: SeedTable, profile: Profile, op: SeedOp, step_index: int, layout: str, dims: dict[str, Dim],
    rng: random.Random,
) -> tuple[dict[str, Any], str, dict[str, Dim]] | None:  # fmt: skip
    """(params, new layout, new dims) of ``op`` on the running tensor, or None when its rules fail."""
    names = _names(table, profile, layout, dims)
    params: dict[str, Any] = {}
    for pname, spec in op.params.items():
        params[pname] = names[pname] = sample_param(spec, profile, names, rng)
    if not all(evaluate(rule, names) for rule in op.requires):
        return None
    new_layout = op.layout_out or layout
    new_dims = {} if op.layout_out else dict(dims)
    for key, rule in op.out.items():
        dim = table.layouts[layout].channel if key == "channel" else key
        value = int(evaluate(rule, names))
        if isinstance(rule, str) and rule in dims:
            symbol = dims[rule].symbol
        elif isinstance(rule, str) and rule in op.params and op.params[rule].arg:
            symbol = f"param:{step_index}:{rule}"
        else:
            symbol = None
        new_dims[dim] = Dim(value, symbol)
    if set(new_dims) != set(table.layouts[new_layout].dims) or any(d.value < 1 for d in new_dims.values()):
        return None
    if prod(d.value for d in new_dims.values()) > profile.max_numel:
        return None
    return params, new_layout, new_dims


def _pick(pool: list[SeedOp], rng: random.Random, anchor: bool) -> SeedOp:
    """A family uniformly (an anchor family when ``anchor`` and one is possible), then an op of it."""
    by_family: dict[str, list[SeedOp]] = defaultdict(list)
    for op in pool:
        by_family[op.family].append(op)
    families = sorted(by_family)
    if anchor and ANCHORS & set(families):
        families = sorted(ANCHORS & set(families))
    return rng.choice(by_family[rng.choice(families)])


def compose(
    table: SeedTable,
    device: str,
    rng: random.Random,
    n_ops: int,
    *,
    dtype: str = "float32",
    anchor_probability: float = 0.6,
    tries: int = 50,
) -> Composition | None:
    """A chain of ``n_ops`` operators with consistent shapes, or None when ``tries`` draws all failed.

    With ``anchor_probability`` the first operator comes from a heavy family (linear, conv, attention, MLP,
    norm, pool), as KernelBench's fused problems mostly start with one; elementwise ops follow."""
    profile = table.profiles[device]
    layouts = sorted(table.layouts)
    weights = [table.layouts[x].weight for x in layouts]
    for _ in range(tries):
        layout = rng.choices(layouts, weights)[0]
        dims = initial_dims(table, profile, layout, rng)
        if prod(d.value for d in dims.values()) > profile.max_numel:
            continue
        comp = Composition(layout=layout, dims=dims, dtype=dtype)
        for i in range(n_ops):
            last = i == n_ops - 1
            pool = [
                op
                for op in table.ops
                if table.accepts(op, layout) and dtype in op.dtypes and (last or not op.terminal)
                and not (comp.steps and comp.steps[-1].op.name == op.name)
            ]  # fmt: skip
            applied = None
            anchor = i == 0 and rng.random() < anchor_probability
            for _ in range(12):
                op = _pick(pool, rng, anchor)
                applied = apply_op(table, profile, op, i, layout, dims, rng)
                if applied is not None:
                    break
            if applied is None:
                break
            params, new_layout, new_dims = applied
            comp.steps.append(Step(op, params, layout, dims))
            layout, dims = new_layout, new_dims
        if len(comp.steps) == n_ops:
            return comp
    return None


def _literal(value: Any) -> str:
    return repr(value) if isinstance(value, (bool, float, str)) else str(value)


class _Renderer:
    """Turns a Composition into source text, allocating constant and argument names."""

    def __init__(self, table: SeedTable, comp: Composition) -> None:
        self.table, self.comp = table, comp
        self.constants: dict[str, int] = {d.symbol: d.value for d in comp.dims.values() if d.symbol}
        self.param_symbols: dict[str, str] = {}
        self.init_args: list[str] = []
        for i, step in enumerate(comp.steps):
            for pname, spec in step.op.params.items():
                if spec.arg:
                    name = spec.arg
                    n = 2
                    while name in self.constants:
                        name, n = f"{spec.arg}_{n}", n + 1
                    self.constants[name] = step.params[pname]
                    self.param_symbols[f"param:{i}:{pname}"] = name

    def symbol(self, dim: Dim) -> str | None:
        if dim.symbol is None:
            return None
        return self.param_symbols.get(dim.symbol, dim.symbol)

    def _use(self, name: str) -> str:
        if name not in self.init_args:
            self.init_args.append(name)
        return name

    def _dim_text(self, dim: Dim, in_init: bool) -> str:
        sym = self.symbol(dim)
        return self._use(sym) if in_init and sym else str(dim.value)

    def fill(self, template: str, i: int, step: Step, in_init: bool, extra: dict[str, str]) -> str:
        """The template with its placeholders filled, in order of appearance; in ``__init__`` a size or parameter
        that has a name is written by name (and becomes a constructor argument), elsewhere as its value."""
        spec = self.table.layouts[step.layout]
        dims = {**step.dims, "cs": step.dims[spec.channel], "last": step.dims[spec.dims[-1]]}
        values: dict[str, str] = {}
        for _, name, _, _ in string.Formatter().parse(template):
            if name is None or name in values:
                continue
            if name in extra:
                values[name] = extra[name]
            elif name == "m":
                values[name] = f"{step.op.name}_{i}"
            elif name in dims:
                values[name] = self._dim_text(dims[name], in_init)
            elif name == "bshape":
                trailing = 0 if spec.channel == spec.dims[-1] else len(spec.dims) - 2
                values[name] = ", ".join([self._dim_text(step.dims[spec.channel], in_init)] + ["1"] * trailing)
            elif name == "cdim":
                values[name] = str(spec.cdim)
            else:
                sym = self.param_symbols.get(f"param:{i}:{name}")
                values[name] = self._use(sym) if in_init and sym else _literal(step.params[name])
        return template.format(**values)

    def shape(self, dims: dict[str, Dim], layout: str) -> str:
        parts = []
        for k in self.table.layouts[layout].dims:
            sym = self.symbol(dims[k])
            parts.append(sym if sym and sym in self.constants else str(dims[k].value))
        dtype = "" if self.comp.dtype == "float32" else f", dtype=torch.{self.comp.dtype}"
        return f"torch.randn({', '.join(parts)}{dtype})"

    def render(self, title: str) -> str:
        init_lines: list[str] = []
        fwd_lines: list[str] = []
        inputs = ["x"]
        shapes = [self.shape(self.comp.dims, self.comp.layout)]
        for i, step in enumerate(self.comp.steps):
            extra = {"x": "x"}
            if step.op.inputs:
                extra["y"] = f"y{len(inputs)}"
                inputs.append(extra["y"])
                shapes.append(self.shape(step.dims, step.layout))
            if step.op.init:
                init_lines += self.fill(step.op.init, i, step, True, extra).splitlines()
            fwd_lines += self.fill(step.op.forward, i, step, False, extra).splitlines()
        if self.comp.dtype != "float32":
            init_lines.append(f"self.to(torch.{self.comp.dtype})")
        args = "".join(f", {a}" for a in self.init_args)
        body = [f'class Model(nn.Module):\n    """{title}"""\n', f"    def __init__(self{args}):",
                "        super().__init__()"]  # fmt: skip
        body += [f"        {line}" for line in init_lines]
        body += ["", f"    def forward(self, {', '.join(inputs)}):"]
        body += [f"        {line}" for line in fwd_lines] + ["        return x"]
        used = {s for s in self.constants if any(s in x for x in shapes) or s in self.init_args}
        consts = [f"{k} = {_literal(v)}" for k, v in self.constants.items() if k in used]
        return "\n".join(
            [HEADER, "", *body, "", "", *consts, "", "", "def get_inputs():", f"    return [{', '.join(shapes)}]",
             "", "", "def get_init_inputs():", f"    return [{', '.join(self.init_args)}]", ""]
        )  # fmt: skip


def render(table: SeedTable, comp: Composition, title: str | None = None) -> str:
    """The KernelBench-format program of a composition."""
    return _Renderer(table, comp).render(title or f"Synthesised: {' -> '.join(comp.ops)}.")
