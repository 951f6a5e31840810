"""scripts/bench_reward.py's summaries and tables: per phase rewards per hour, per variant statuses, scores, latency
against the Verdicts' stages, the correct samples' longest silences, and where samples waited in the executor."""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from typing import Any

from benchlib import fmt, print_table


def summarize_phase(name: str, results: list[dict], wall: float, executor: dict | None = None) -> dict[str, Any]:
    """A phase's rewards per hour and per-variant numbers; ``executor``: its executor's ``stats()`` after it (counts
    since the executor started: a warm pass's include its cold pass's)."""
    by_variant: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_variant[r["variant"]].append(r)
    variants = {}
    for kind, rs in sorted(by_variant.items()):
        statuses = Counter(r.get("status") or status_of(r) for r in rs)
        scores = [r["score"] for r in rs if "score" in r]
        evals = [r.get("evaluate_s", r["seconds"]) for r in rs]
        variants[kind] = {
            "n": len(rs),
            "statuses": dict(statuses),
            "mean_score": sum(scores) / len(scores) if scores else None,
            "max_evaluate_s": max(evals),
            "mean_s": sum(r["seconds"] for r in rs) / len(rs),
            "first_s": min(r["seconds"] for r in rs),
            "stages": mean_stages([r["stages"] for r in rs if "stages" in r]),
            "longest_silence_s": longest_silence([r for r in rs if (r.get("status") or status_of(r)) == "correct"]),
        }
    return {
        "phase": name,
        "samples": len(results),
        "wall_s": wall,
        "per_hour": 3600 * len(results) / wall,
        "adapter_s": adapter_seconds(results),
        "variants": variants,
        "executor_stats": executor,
    }


def queue_rows(report: dict[str, Any]) -> list[list[str]]:
    """Per phase and stage of the executor's queue (``waits_s``) and of its prebuilds (each capture's and build's
    wait for a build worker and its time on one): how many there now (a cut phase's unfinished samples), how many
    passed it, their mean, longest and summed seconds."""
    rows = []
    for p in report["phases"]:
        stats = p.get("executor_stats") or {}
        stages = {**(stats.get("waits_s") or {})}
        prebuilds = stats.get("prebuilds") or {}
        stages.update({f"prebuild: {k}": v for k, v in prebuilds.items() if isinstance(v, dict)})
        for stage, w in stages.items():
            counts = [str(w.get("now", "-")), str(w["n"])]
            rows.append([p["phase"], stage, *counts, fmt(w["mean"], ".2f"), fmt(w["max"], ".1f"), fmt(w["sum"], ".0f")])
    return rows


def adapter_seconds(results: list[dict]) -> dict[str, float] | None:
    """The reward function's own seconds per sample, beside its evaluation: a sample's time in ``compute_score``
    less the evaluation it awaited (extraction, the judge where it outlasted the evaluation, scoring, the ledger
    and metrics), mean and max. Unlike the two phases' walls, it does not depend on what the host did meanwhile.
    None for the executor-alone phase."""
    own = [r["seconds"] - r["evaluate_s"] for r in results if "evaluate_s" in r]
    if not own:
        return None
    return {"mean": sum(own) / len(own), "max": max(own)}


STAGE_COLUMNS = ("total_s", "build_s", "device_wait_s", "worker_s")


def mean_stages(stages: list[dict[str, float]]) -> dict[str, float] | None:
    """Mean seconds of each of the Verdicts' stages. The table shows four: the evaluation's own time (total), its
    builds, its waits for the device or the task's baseline, and the rest, ``worker_s``: what the evaluation spent
    in its worker (setup, reference, load, trials, timing, teardown), which holds an execution slot."""
    if not stages:
        return None
    n = len(stages)
    keys = sorted({k for st in stages for k in st} | set(STAGE_COLUMNS[:3]))
    out = {k: sum(st.get(k, 0.0) for st in stages) / n for k in keys}
    out["worker_s"] = (
        out["total_s"] - out["build_s"] - out["device_wait_s"] - sum(st.get("static_s", 0.0) for st in stages) / n
    )
    return out


def longest_silence(results: list[dict]) -> dict[str, float]:
    """Per stage, the longest any of these samples' workers went without a message (their Verdicts'
    ``diagnostics.longest_silence_s``): for the correct ones, the evidence a stage limit's floor must stay above."""
    out: dict[str, float] = {}
    for r in results:
        for stage, s in (r.get("silence") or {}).items():
            out[stage] = max(out.get(stage, 0.0), s)
    return out


def status_of(r: dict) -> str:
    if r.get("masked"):
        return "masked"
    if r.get("hack"):
        return "hack"
    if r.get("correct"):
        return "correct"
    return "compiled" if r.get("compiled") else "not compiled"


def print_report(report: dict[str, Any], args: argparse.Namespace) -> None:
    """The phases table (rewards per hour, reward over executor) and the per-variant table."""
    print_table(
        f"{report['tasks']} tasks x {args.k} responses, {args.device}, {args.workers} workers"
        + (" (ray)" if args.ray else ""),
        ["phase", "samples", "wall s", "per hour", "reward / exec", "adapter s/sample (mean, max)"],
        [
            [
                p["phase"],
                str(p["samples"]),
                fmt(p["wall_s"], ".1f"),
                fmt(p["per_hour"], ".0f"),
                fmt(report.get(f"reward_over_exec_{p['phase'].split('(')[1][:-1]}"), ".3f")
                if p["phase"].startswith("reward")
                else "",
                f"{p['adapter_s']['mean']:.3f}, {p['adapter_s']['max']:.3f}" if p.get("adapter_s") else "",
            ]
            for p in report["phases"]
        ],
    )
    rows_out = []
    for p in report["phases"]:
        for kind, v in p["variants"].items():
            rows_out.append(
                [
                    p["phase"],
                    kind,
                    str(v["n"]),
                    json.dumps(v["statuses"]),
                    fmt(v["mean_score"], ".3f"),
                    fmt(v["max_evaluate_s"], ".1f"),
                ]
            )
    print_table("per variant", ["phase", "variant", "n", "statuses", "mean score", "max eval s"], rows_out)
    stage_rows = [
        [p["phase"], kind, fmt(v["mean_s"], ".1f"), *(fmt(v["stages"][k], ".1f") for k in STAGE_COLUMNS)]
        for p in report["phases"]
        for kind, v in p["variants"].items()
        if v.get("stages")
    ]
    if stage_rows:
        # latency: from the sample's submission to its result (queues and prebuilds included); total_s and the
        # rest: the Verdict's own stages (a prebuilt extension's build is not in them).
        columns = ["phase", "variant", "latency_s", *STAGE_COLUMNS]
        print_table("per variant, mean seconds", columns, stage_rows)
    silent = [
        [p["phase"], kind, fmt(v["first_s"], ".1f"), *(fmt(v["longest_silence_s"].get(st), ".2f") for st in SILENT)]
        for p in report["phases"]
        for kind, v in p["variants"].items()
        if v.get("longest_silence_s")
    ]
    queue = queue_rows(report)
    if queue:
        # Where samples waited before and in their slots, from the executor (see rubric_rl/sandbox/executors/waits.py).
        print_table("executor queue, seconds", ["phase", "stage", "now", "n", "mean", "max", "sum"], queue)
    if silent:
        # The correct samples only: how long a legitimate worker went without a message, against the floor.
        floor = report.get("stage_floor_s")
        title = f"correct samples: first result, longest silence per stage (s; the stage floor {fmt(floor, 'g')} s)"
        print_table(title, ["phase", "variant", "first_s", *SILENT], silent)


SILENT = ("setup", "reference", "load", "correctness", "compile", "timing", "profile")
