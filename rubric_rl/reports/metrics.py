"""KernelBench's metrics over a rollout's results, and a noise-aware fast_p beside the plain one.

Over the N finished tasks of one run and policy track, each task counted by its kept program (the fastest correct
one, else its last):

- ``correct_rate`` = correct / N.
- ``fast_p`` (KernelBench) = |{correct and speedup > p}| / N, against eager and against torch.compile; a speedup
  that was not measured never counts, so fast_0 equals the correct rate only when every correct program was timed.
- ``geomean_speedup`` = exp(mean(log speedup)) over correct programs with a measured speedup.
- noise-aware ``fast_p``: |{correct and L > p}| / N, where L is the lower bound of the program's speedup over its
  timed rounds. The Verdict keeps every round's milliseconds (``timings.rounds_ms``), and round r of each model
  ran back to back on the same inputs, so each round gives a paired ratio q_r = eager_r / candidate_r (compile_r /
  candidate_r against torch.compile). L is the 10th percentile of the q_r (linear interpolation, numpy's default):
  the program beat p in at least 90% of its rounds. With fewer than ``MIN_ROUNDS`` pairs, L is unknown and the
  program does not count. Where torch.compile was not timed in the run (its baseline was reused), the compile
  ratios are the eager ones times the Verdict's compile/eager ratio (speedup_compile / speedup_eager), a constant:
  their spread is the eager pairing's.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

import numpy as np

from rubric_rl.agents.pcv.records import TaskResult, Turn
from rubric_rl.sandbox import Verdict

P_VALUES = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile")
LOWER_QUANTILE = 0.10
MIN_ROUNDS = 5


def p_key(p: float) -> str:
    return f"{p:g}"


def speedup(verdict: Verdict | None, against: str) -> float | None:
    if verdict is None or verdict.status != "correct":
        return None
    return verdict.speedup_eager if against == "eager" else verdict.speedup_compile


def paired_ratios(verdict: Verdict, against: str) -> list[float]:
    """Per-round speedups q_r of a correct Verdict against ``against`` (see the module docstring)."""
    t = verdict.timings
    if t is None or "candidate" not in t.rounds_ms:
        return []
    cand = t.rounds_ms["candidate"]
    base_key = against if against in t.rounds_ms else "eager"
    if base_key not in t.rounds_ms:
        return []
    scale = 1.0
    if against == "compile" and base_key == "eager":
        if verdict.speedup_compile is None or not verdict.speedup_eager:
            return []
        scale = verdict.speedup_compile / verdict.speedup_eager
    base = t.rounds_ms[base_key]
    return [scale * b / c for b, c in zip(base, cand, strict=False) if c > 0]


def lower_speedup(verdict: Verdict | None, against: str) -> float | None:
    """L: the 10th percentile of the paired per-round speedups; None when unknown."""
    if verdict is None or verdict.status != "correct":
        return None
    q = paired_ratios(verdict, against)
    if len(q) < MIN_ROUNDS:
        return None
    return float(np.quantile(np.asarray(q), LOWER_QUANTILE))


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def fast_p_table(results: list[TaskResult]) -> dict[str, dict[str, float]]:
    """{"eager": {"0": .., "0.5": ..}, "compile": {...}, "eager_noise_aware": {...}, "compile_noise_aware": {...}}."""
    n = len(results)
    table: dict[str, dict[str, float]] = {}
    for against in BASELINES:
        plain = [speedup(r.verdict, against) for r in results]
        lower = [lower_speedup(r.verdict, against) for r in results]
        table[against] = {p_key(p): sum(s is not None and s > p for s in plain) / n if n else 0.0 for p in P_VALUES}
        table[f"{against}_noise_aware"] = {
            p_key(p): sum(s is not None and s > p for s in lower) / n if n else 0.0 for p in P_VALUES
        }
    return table


def _distribution(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "total": 0.0}
    return {"mean": statistics.fmean(values), "median": statistics.median(values), "total": sum(values)}


def failure_breakdown(results: list[TaskResult], turns: list[Turn]) -> dict[str, Any]:
    """Final statuses, every coder turn's status, hack rules fired, programs not found, failures outside the model."""
    coder = [t for t in turns if t.role == "coder" and t.verdict is not None]
    judged = [t for t in coder if not t.infra_failed]
    return {
        "final_status": dict(sorted(Counter(r.status for r in results).items())),
        "turn_status": dict(sorted(Counter(t.verdict.status for t in judged if t.verdict).items())),
        "hack_rules": dict(Counter(rule for t in judged if t.verdict for rule in t.verdict.hack_rules).most_common()),
        "no_program": dict(
            sorted(Counter((t.extraction_error or "").split(":")[0] for t in judged if t.extraction_error).items())
        ),
        "infra_errors": sum(t.infra_failed for t in coder),
        "endpoint_errors": sum(t.endpoint_error is not None for t in turns),
        "stop_reasons": dict(sorted(Counter(r.stop_reason for r in results).items())),
    }


def problem_row(r: TaskResult) -> dict[str, Any]:
    v = r.verdict
    return {
        "task_id": r.task_id,
        "name": r.task_name,
        "track": r.track,
        "status": r.status,
        "speedup_eager": speedup(v, "eager"),
        "speedup_compile": speedup(v, "compile"),
        "lower_speedup_eager": lower_speedup(v, "eager"),
        "lower_speedup_compile": lower_speedup(v, "compile"),
        "own_kernel_share": v.own_kernel_time_share if v is not None else None,
        "coder_turns": r.coder_turns,
        "first_correct_turn": r.first_correct_turn,
        "plans": r.plans,
        "stop_reason": r.stop_reason,
        "tokens": r.tokens,
        "seconds": r.seconds,
        "hack_rules": v.hack_rules if v is not None else [],
    }


def track_metrics(results: list[TaskResult], turns: list[Turn]) -> dict[str, Any]:
    """Every metric of one run and track."""
    n = len(results)
    correct = [r for r in results if r.status == "correct"]
    firsts = [r.first_correct_turn for r in results if r.first_correct_turn is not None]
    stages: dict[str, list[float]] = {}
    for r in results:
        for k, v in r.stage_seconds.items():
            stages.setdefault(k, []).append(v)
    timed = [r for r in correct if len(paired_ratios(r.verdict, "eager")) >= MIN_ROUNDS] if correct else []
    return {
        "tasks": n,
        "correct": len(correct),
        "correct_rate": len(correct) / n if n else 0.0,
        "fast_p": fast_p_table(results),
        "geomean_speedup": {
            against: geomean([s for r in correct if (s := speedup(r.verdict, against)) is not None])
            for against in BASELINES
        },
        "timed_with_rounds": len(timed),
        "turns_to_first_correct": {
            "mean": statistics.fmean(firsts) if firsts else None,
            "median": statistics.median(firsts) if firsts else None,
            "never": n - len(firsts),
            "counts": {str(k): v for k, v in sorted(Counter(firsts).items())},
        },
        "failures": failure_breakdown(results, turns),
        "seconds_per_task": _distribution([r.seconds for r in results]),
        "tokens_per_task": _distribution([float(r.tokens) for r in results]),
        "stage_seconds_per_task": {k: _distribution(v) for k, v in sorted(stages.items())},
    }


def run_metrics(results: list[TaskResult], turns: list[Turn]) -> dict[str, dict[str, Any]]:
    """Metrics per policy track, each track apart (a run normally has one)."""
    out: dict[str, dict[str, Any]] = {}
    for track in sorted({r.track for r in results}):
        mine = [r for r in results if r.track == track]
        ids = {r.task_id for r in mine}
        out[track] = track_metrics(mine, [t for t in turns if t.task_id in ids])
    return out
