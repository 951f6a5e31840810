"""Measuring a candidate task: the filters that need to run it, in a worker process.

Run as ``python -m rubric_rl.tasks.synth.probe``: it reads one JSON request per line on stdin (``{"code",
"config"}``), answers one JSON line on stdout, and serves requests until stdin closes. Anything the program
prints goes to stderr, so it cannot corrupt the answers.

What it protects against: a program that raises, returns garbage, hangs or crashes the interpreter costs one
answer (the parent kills and restarts the worker on a timeout or an exit). What it does not: the program runs
with this user's rights, like any reference program run by the sandbox's worker; tasks from an LLM composer
are screened statically first (``rubric_rl.tasks.synth.llm``), not confined.

Filters, in order; the first to fail ends the probe (the compile filter, the slowest, runs last):

- ``runs_eager``: ``Model(*get_init_inputs())`` and a forward on ``get_inputs()`` return finite tensors;
- ``deterministic``: a second model built from the same seed, and a second call, give the same outputs;
- ``non_trivial``: the output differs between two input draws, is not constant, is not one of the inputs, and
  is not near zero on both draws (where all-zeros would pass the correctness check);
- ``no_dead_op``: no statement of ``forward`` that rebinds a variable (``x = op(x)``: one operator, or one
  nested expression) can be dropped while the output stays within tolerance;
- ``runtime``: the eager median lies in the configured window (milliseconds);
- ``compiles``: ``torch.compile`` of the model runs and agrees with eager.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import statistics
import sys
import time
import traceback
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rubric_rl.syntax import parse_python

FILTER_ORDER = ("runs_eager", "deterministic", "non_trivial", "no_dead_op", "runtime", "compiles")


class ProbeConfig(BaseModel):
    """Thresholds of the run-time filters (sent to the worker with each request)."""

    model_config = ConfigDict(extra="forbid")

    device: str = Field(default="cpu", description="cpu or cuda.")
    seed: int = Field(default=0, description="Seed of model construction and the first input draw.")
    threads: int | None = Field(default=None, ge=1, description="torch threads in the worker; None: torch's default.")
    determinism_rtol: float = Field(default=1e-5, ge=0, description="Two runs agree within this (relative).")
    determinism_atol: float = Field(default=1e-6, ge=0, description="Two runs agree within this (absolute).")
    constant_atol: float = Field(default=1e-6, ge=0, description="Outputs of two draws this close: constant.")
    near_zero_atol: float = Field(
        default=1e-3, ge=0, description="Max |output| below this on both draws: near zero (zeros would pass)."
    )
    dead_op_rtol: float = Field(default=1e-4, ge=0, description="Dropping an op changes the output less: dead.")
    dead_op_atol: float = Field(default=1e-4, ge=0, description="Absolute part of the dead-op tolerance.")
    runtime_ms: tuple[float, float] = Field(default=(0.1, 20.0), description="Eager median window, ms.")
    warmup: int = Field(default=2, ge=0, description="Untimed eager calls before timing.")
    reps: int = Field(default=10, ge=1, description="Timed eager calls (fewer when max_timing_s runs out).")
    max_timing_s: float = Field(default=5.0, gt=0, description="Seconds the timed calls may take in all.")
    compile: bool = Field(default=True, description="Run the torch.compile filter.")
    compile_mode: str = Field(default="default", description="torch.compile mode.")
    compile_rtol: float = Field(default=1e-3, ge=0, description="Compiled vs eager agreement (relative).")
    compile_atol: float = Field(default=1e-3, ge=0, description="Compiled vs eager agreement (absolute).")


class _Fail(Exception):
    def __init__(self, measurement: dict[str, Any]) -> None:
        super().__init__(measurement.get("error", "failed"))
        self.measurement = measurement


def _err(e: BaseException) -> str:
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    return last[:500]


def _outputs(out: Any) -> list[Any]:
    import torch

    items = list(out) if isinstance(out, (tuple, list)) else [out]
    if not items or not all(isinstance(t, torch.Tensor) for t in items):
        raise _Fail({"error": f"forward returned {type(out).__name__}, not tensors"})
    return items


def _max_diff(a: list[Any], b: list[Any]) -> float:
    if [t.shape for t in a] != [t.shape for t in b]:
        return float("inf")
    pairs = zip(a, b, strict=True)
    return max(float((x.double() - y.double()).abs().max()) if x.numel() else 0.0 for x, y in pairs)


def _close(a: list[Any], b: list[Any], rtol: float, atol: float) -> bool:
    import torch

    if [t.shape for t in a] != [t.shape for t in b]:
        return False
    return all(torch.allclose(x.double(), y.double(), rtol=rtol, atol=atol) for x, y in zip(a, b, strict=True))


class _Task:
    """The program's namespace, and models and inputs built from seeds."""

    def __init__(self, code: str, cfg: ProbeConfig) -> None:
        import torch

        self.code, self.cfg, self.device = code, cfg, torch.device(cfg.device)
        self.ns = self._exec(code)

    def _exec(self, code: str) -> dict[str, Any]:
        ns: dict[str, Any] = {"__name__": "synth_task"}
        exec(compile(code, "<task>", "exec"), ns)  # the point of this module: run the candidate task
        return ns

    def model(self, ns: dict[str, Any] | None = None) -> Any:
        import torch

        ns = ns or self.ns
        torch.manual_seed(self.cfg.seed)
        with self.device:  # built where it runs: a large model is not initialised on the host first
            return ns["Model"](*ns["get_init_inputs"]()).to(self.device)

    def inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with self.device:
            drawn = self.ns["get_inputs"]()
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in drawn]

    def run(self, model: Any, inputs: list[Any]) -> list[Any]:
        import torch

        with torch.no_grad():
            out = _outputs(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return [t.detach() for t in out]


def _runs_eager(task: _Task) -> tuple[dict[str, Any], Any, list[Any], list[Any]]:
    import torch

    try:
        model = task.model()
        inputs = task.inputs(task.cfg.seed + 1)
        t0 = time.perf_counter()
        out = task.run(model, inputs)
        first_ms = 1000 * (time.perf_counter() - t0)
    except _Fail:
        raise
    except Exception as e:  # the program's own failure: recorded, not raised
        raise _Fail({"error": _err(e)}) from e
    finite = all(bool(torch.isfinite(t).all()) for t in out if t.is_floating_point())
    m = {"first_call_ms": round(first_ms, 3), "outputs": [list(t.shape) for t in out],
         "params": sum(p.numel() for p in model.parameters()), "finite": finite}  # fmt: skip
    if not finite:
        raise _Fail({**m, "error": "output has NaN or Inf"})
    return m, model, inputs, out


def _deterministic(task: _Task, model: Any, inputs: list[Any], out: list[Any]) -> dict[str, Any]:
    cfg = task.cfg
    again = task.run(model, inputs)
    rebuilt = task.run(task.model(), inputs)
    diff = max(_max_diff(out, again), _max_diff(out, rebuilt))
    m = {"max_diff": diff}
    if not (_close(out, again, cfg.determinism_rtol, cfg.determinism_atol)
            and _close(out, rebuilt, cfg.determinism_rtol, cfg.determinism_atol)):  # fmt: skip
        raise _Fail({**m, "error": "two runs on the same inputs disagree"})
    return m


def _non_trivial(task: _Task, model: Any, inputs: list[Any], out: list[Any]) -> dict[str, Any]:
    import torch

    cfg = task.cfg
    other = task.run(model, task.inputs(cfg.seed + 2))
    spread = max(float(t.double().std()) if t.numel() > 1 else 0.0 for t in out)
    max_abs = max(float(t.abs().max()) if t.numel() else 0.0 for t in out + other)
    m = {"draw_diff": _max_diff(out, other), "max_abs": max_abs, "within_output_std": spread}
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if any(_close([t], [x], 1e-5, 1e-6) for t in out for x in tensors if t.shape == x.shape):
        raise _Fail({**m, "error": "the output is one of the inputs"})
    if _close(out, other, 0.0, cfg.constant_atol) or spread == 0.0:
        raise _Fail({**m, "error": "the output is constant"})
    if max_abs < cfg.near_zero_atol:
        raise _Fail({**m, "error": "the output is near zero on every draw"})
    return m


def _forward(tree: ast.Module) -> ast.FunctionDef | None:
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Model":
            for node in cls.body:
                if isinstance(node, ast.FunctionDef) and node.name == "forward":
                    return node
    return None


def rebinding_statements(code: str) -> list[int]:
    """Indices in ``Model.forward``'s body of statements ``name = ...`` that rebind a name already bound."""
    forward = _forward(parse_python(code))
    if forward is None:
        return []
    bound = {a.arg for a in forward.args.args}
    found = []
    for i, stmt in enumerate(forward.body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if stmt.targets[0].id in bound:
                found.append(i)
            bound.add(stmt.targets[0].id)
    return found


def _without(code: str, index: int) -> tuple[str, str]:
    tree = parse_python(code)
    forward = _forward(tree)
    assert forward is not None  # rebinding_statements found it
    dropped = ast.unparse(forward.body[index])
    forward.body[index] = ast.Pass()
    return ast.unparse(tree), dropped


def _no_dead_op(task: _Task, inputs: list[Any], out: list[Any]) -> dict[str, Any]:
    cfg = task.cfg
    dead, checked = [], 0
    for index in rebinding_statements(task.code):
        variant, dropped = _without(task.code, index)
        try:
            ablated = task.run(task.model(task._exec(variant)), inputs)
        except Exception:  # noqa: BLE001 - dropping it broke the program: it is not dead
            checked += 1
            continue
        checked += 1
        if _close(ablated, out, cfg.dead_op_rtol, cfg.dead_op_atol):
            dead.append(dropped)
    m = {"statements_checked": checked, "dead": dead}
    if dead:
        raise _Fail({**m, "error": f"dropping `{dead[0]}` leaves the output unchanged"})
    return m


def _runtime(task: _Task, model: Any, inputs: list[Any]) -> dict[str, Any]:
    import torch

    cfg, lo, hi = task.cfg, task.cfg.runtime_ms[0], task.cfg.runtime_ms[1]
    cuda = task.device.type == "cuda"
    times: list[float] = []
    with torch.no_grad():
        for _ in range(cfg.warmup):
            model(*inputs)
        budget = time.perf_counter() + cfg.max_timing_s
        for _ in range(cfg.reps):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*inputs)
            if cuda:
                torch.cuda.synchronize()
            times.append(1000 * (time.perf_counter() - t0))
            if time.perf_counter() > budget or times[-1] > 10 * hi:
                break
    median = statistics.median(times)
    m = {"median_ms": round(median, 4), "min_ms": round(min(times), 4), "reps": len(times), "window_ms": [lo, hi]}
    if not lo <= median <= hi:
        raise _Fail({**m, "error": f"eager median {median:.3g} ms is outside [{lo}, {hi}] ms"})
    return m


def _compiles(task: _Task, model: Any, inputs: list[Any], out: list[Any]) -> dict[str, Any]:
    import torch

    cfg = task.cfg
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, mode=cfg.compile_mode)
        t0 = time.perf_counter()
        got = task.run(compiled, inputs)
        seconds = time.perf_counter() - t0
    except _Fail:
        raise
    except Exception as e:  # inductor or the program failing under compile: recorded
        raise _Fail({"error": _err(e)}) from e
    m = {"first_call_s": round(seconds, 2), "max_diff_vs_eager": _max_diff(got, out), "mode": cfg.compile_mode}
    if not _close(got, out, cfg.compile_rtol, cfg.compile_atol):
        raise _Fail({**m, "error": "torch.compile disagrees with eager"})
    return m


def probe(code: str, cfg: ProbeConfig) -> dict[str, Any]:
    """Every run-time filter's measurement, up to the first that fails."""
    import torch

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    results: dict[str, dict[str, Any]] = {}
    current = "runs_eager"
    try:
        try:
            task = _Task(code, cfg)
        except Exception as e:  # the program does not even define itself
            raise _Fail({"error": _err(e)}) from e
        m, model, inputs, out = _runs_eager(task)
        results[current] = {"passed": True, **m}
        steps = [
            ("deterministic", lambda: _deterministic(task, model, inputs, out)),
            ("non_trivial", lambda: _non_trivial(task, model, inputs, out)),
            ("no_dead_op", lambda: _no_dead_op(task, inputs, out)),
            ("runtime", lambda: _runtime(task, model, inputs)),
        ]
        if cfg.compile:
            steps.append(("compiles", lambda: _compiles(task, model, inputs, out)))
        for current, step in steps:
            try:
                results[current] = {"passed": True, **step()}
            except _Fail:
                raise
            except Exception as e:  # the program failing inside a filter: that filter fails
                raise _Fail({"error": _err(e)}) from e
    except _Fail as f:
        results[current] = {"passed": False, **f.measurement}
        return {"filters": results, "rejected_by": current}
    finally:
        gc.collect()
        if cfg.device == "cuda" and torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {"filters": results, "rejected_by": None}


def main() -> None:
    sys.stdout.flush()
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the programs' prints go to stderr
    import torch  # noqa: F401 - imported once, before the first request

    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        result = probe(request["code"], ProbeConfig.model_validate(request["config"]))
        answers.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
