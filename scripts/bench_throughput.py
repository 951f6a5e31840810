"""Evaluation throughput on a GPU host: candidates per hour, and the build-time cuts one by one.

    python scripts/bench_throughput.py --problems problems.jsonl --out runs/bench_throughput.json [--n 36]

(a)    one candidate at a time, each built and evaluated in a fresh process the way KernelBench's scripts do
       it (scripts/kernelbench_style_eval.py), on the first --kb-baseline candidates;
(cuts) median build seconds of the same candidates' extensions built five ways: torch's default load_inline
       (the build inside (a)); the evaluator's build with no source split and no PCH; with the split (torch
       glue out of the .cu, its host code at -O1); with the split and the shared precompiled torch/extension.h;
       and that last way on a cache without the PCH,
       which the first builds wait for (one of them builds it);
(b)    the local executor on all candidates at once, cold build cache;
(c)    the same again, warm cache (builds and per-task baselines reused); --warm-passes N runs it N times
       (c, c2, ...), for the spread of the warm rate within one run (990 and about 850 per hour on one H100
       in two runs a few minutes apart).
Verdicts of (a) and (b) are compared for the candidates both ran.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchlib import (
    DEFAULT_CANDIDATES,
    REPO,
    agreement,
    candidate_records,
    default_problems,
    discover,
    disturbed_timings,
    fmt,
    print_candidate_table,
    print_table,
    run_logged,
    sandbox_overrides,
    spread,
    write_json,
)

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build.builder import Builder
from rubric_rl.sandbox.build.extension import prepare_build
from rubric_rl.sandbox.evaluate import Evaluator
from rubric_rl.sandbox.executors import ExecutorConfig
from rubric_rl.sandbox.executors.base import default_build_workers
from rubric_rl.sandbox.executors.local import LocalExecutor, visible_gpus


def build_cuts(
    items: list[tuple], arch: str, workers: int, mode: str = "full", only: str = ""
) -> dict[str, list[float | None]]:
    """Seconds per build for each way of building, same extensions, builds of one variant run in parallel.
    ``mode="objects"`` compiles without linking: it needs no CUDA libraries, so it measures the cuts on a
    machine without a GPU (nvcc alone)."""
    ev = Evaluator(SandboxConfig(backend="cuda", build={"cache_dir": Path(tempfile.mkdtemp()) / "build"}))
    specs = []
    for _, _, program in items:
        found, _ = ev.capture(program)
        specs.extend(found)

    def ours(split: bool, pch: bool, cold_pch: bool):
        builder = Builder(Path(tempfile.mkdtemp(prefix="cut-")), use_pch=pch)
        cfg = SandboxConfig(backend="cuda", build={"split_sources": split})
        if pch and not cold_pch:  # the PCH is built once per machine: built before timing, as a service would
            builder.build(prepare_build(specs[0], cfg, arch), mode=mode)

        def one(spec) -> float | None:
            prepared = prepare_build(spec.model_copy(update={"name": spec.name + "_cut"}), cfg, arch)
            outcome = builder.build(prepared, mode=mode)
            if not outcome.ok:
                print(f"build of {spec.name} (split={split}, pch={pch}) failed: {outcome.digest}", file=sys.stderr)
                return None
            return outcome.seconds

        return one

    variants: dict[str, tuple[bool, bool, bool]] = {  # split (its glue at -O1), PCH, PCH not built yet
        "evaluator, no split, no PCH": (False, False, False),
        "evaluator + split": (True, False, False),
        "evaluator + split + PCH": (True, True, False),
        # A cold cache: the first builds wait for the PCH (one of them builds it), as in (b)'s first wave.
        "the same, PCH not yet built": (True, True, True),
    }
    out: dict[str, list[float | None]] = {}
    for name, way in variants.items():
        if only not in name:
            continue
        fn = ours(*way)
        with ThreadPoolExecutor(workers) as pool:
            out[name] = list(pool.map(fn, specs))
        print(f"{name}: {[fmt(x, '.1f') for x in out[name]]}", flush=True)
    return out


def kernelbench_style(items: list[tuple], problems: Path) -> list[dict]:
    results = []
    for name, task, program in items:
        with tempfile.TemporaryDirectory() as d:
            ref, cand = Path(d, "ref.py"), Path(d, "cand.py")
            ref.write_text(task.code)
            cand.write_text(program)
            env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(Path(d, "ext"))}
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, str(REPO / "scripts" / "kernelbench_style_eval.py"), str(ref), str(cand)],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            wall = time.monotonic() - started
            try:
                r = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                r = {"compiled": False, "correct": False, "error": proc.stderr[-300:]}
            results.append({"candidate": name, "wall_s": wall, **r})
    return results


def baseline_records(ex: LocalExecutor) -> list[dict]:
    """What each task's baseline measurement cost (the cold path pays one per task; one timed beside a candidate
    costs no measurement of its own)."""
    return [
        {
            "source": b.source,
            "measure_s": b.measure_s,
            "compile_warmup_s": b.compile_warmup_s,
            "device_wait_s": b.device_wait_s,
            "phases": b.phases,
        }
        for b in ex.baselines.measured_baselines()
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_throughput.json"))
    ap.add_argument("--n", type=int, default=36)
    ap.add_argument("--kb-baseline", type=int, default=4, help="candidates in (a), and in the build cuts")
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--build-workers", type=int, default=None, help="concurrent builds (default: the executor's)")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: a,cuts,b,c")
    ap.add_argument("--build-mode", choices=["full", "objects"], default="full", help="of the build cuts")
    ap.add_argument("--cuts-matching", default="", help="measure only the build cuts whose names contain this")
    ap.add_argument("--a-from", type=Path, default=None, help="take (a) from an earlier run's JSON instead")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="a SandboxConfig field, e.g. timing.l2_flush=false",
    )
    ap.add_argument("--cv-candidates", type=int, default=12, help="candidates evaluated --cv-repeats times")
    ap.add_argument("--cv-repeats", type=int, default=5)
    ap.add_argument(
        "--cache-dir", type=Path, default=None, help="build cache (default: a fresh one; give one to reuse it)"
    )
    ap.add_argument("--slots-per-gpu", type=int, default=ExecutorConfig().slots_per_gpu)
    ap.add_argument("--baseline-workers", type=int, default=ExecutorConfig().baseline_workers_per_gpu)
    ap.add_argument(
        "--warm-passes", type=int, default=1, help="passes of (c), one after another: c, c2, ... (their spread)"
    )
    args = ap.parse_args()
    if args.warm_passes < 1:
        raise SystemExit("--warm-passes: at least 1 (skip (c) with --skip c)")
    skip = set(filter(None, args.skip.split(",")))

    from rubric_rl.tasks import load_tasks

    problems = args.problems or default_problems()
    tasks = {t.id: t for t in load_tasks(problems)}
    chosen = spread(discover(args.candidates, tasks), args.n)
    items = [(path.stem, tasks[tid], path.read_text()) for tid, path in chosen]
    gpus = visible_gpus()
    arch = gpus[0]["arch"] if gpus else "9.0"
    report: dict = {"candidates": len(items), "gpu": gpus[0]["name"] if gpus else None, "cores": os.cpu_count()}

    kb = []
    if args.a_from:
        report["a_kernelbench_style"] = json.loads(args.a_from.read_text())["a_kernelbench_style"]
        kb = report["a_kernelbench_style"]["results"]
    elif "a" not in skip:
        started = time.monotonic()
        kb = kernelbench_style(items[: args.kb_baseline], problems)
        wall = time.monotonic() - started
        report["a_kernelbench_style"] = {
            "candidates": len(kb),
            "wall_s": wall,
            "per_hour": 3600 * len(kb) / wall,
            "results": kb,
        }
        write_json(args.out, report)

    if "cuts" not in skip:
        cuts = build_cuts(
            items[: args.kb_baseline],
            arch,
            min(args.build_workers or default_build_workers("cuda"), 8),
            args.build_mode,
            args.cuts_matching,
        )
        if kb:  # the same extensions, built by torch's default load_inline in (a), one at a time
            cuts = {"torch default load_inline (in (a))": [r.get("build_s") for r in kb], **cuts}
        report["build_cuts"] = {
            k: {
                "median_s": statistics.median(ok) if (ok := [x for x in v if x is not None]) else None,
                "n": len(v),
                "failed": sum(x is None for x in v),
                "seconds": v,
            }
            for k, v in cuts.items()
        }
        write_json(args.out, report)
        print_table(
            f"median build seconds, same extensions ({args.build_mode} builds, {os.cpu_count()} cores)",
            ["build", "median s", "n", "failed"],
            [[k, fmt(v["median_s"], ".1f"), str(v["n"]), str(v["failed"])] for k, v in report["build_cuts"].items()],
        )

    evaluations: dict[str, list] = {}  # each candidate's verdicts: (b), then the warm passes
    if not {"b", "c"} <= skip:
        cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="bench-tp-")) / "build"
        sandbox = SandboxConfig(
            backend="cuda", build={"cache_dir": cache}, timing={"trials": args.perf_trials}
        ).updated(**sandbox_overrides(args.set))
        ex = LocalExecutor(
            sandbox,
            ExecutorConfig(
                build_workers=args.build_workers,
                slots_per_gpu=args.slots_per_gpu,
                baseline_workers_per_gpu=args.baseline_workers,
            ),
        )
        evaluations.update({name: [] for name, _, _ in items})
        warm = [] if "c" in skip else ["c", *(f"c{i}" for i in range(2, args.warm_passes + 1))]
        phases = ([] if "b" in skip else ["b"]) + warm
        for phase in phases:
            log = args.out.with_name(f"{args.out.stem}_{phase}_verdicts.jsonl")
            verdicts, wall = asyncio.run(run_logged(ex, items, log))
            for (name, _, _), v in zip(items, verdicts, strict=True):
                evaluations[name].append(v)
            key = f"{phase}_executor_{'cold' if phase == 'b' else 'warm'}"
            report[key] = {
                "candidates": len(items),
                "wall_s": wall,
                "per_hour": 3600 * len(items) / wall,
                "statuses": {s: sum(v.status == s for v in verdicts) for s in sorted({v.status for v in verdicts})},
                "median_build_s": statistics.median([b.seconds for v in verdicts for b in v.builds] or [0]),
                "disturbed_timings": disturbed_timings(
                    [(name, v) for (name, _, _), v in zip(items, verdicts, strict=True)]
                ),
                "executor": ex.stats(),
                "baselines": baseline_records(ex),
            }
            write_json(args.out, report)
            print(json.dumps(report[key]["executor"]), flush=True)
            print(f"{phase}: {len(report[key]['disturbed_timings'])} of {len(items)} timings disturbed", flush=True)
        ran = len(phases)
        if ran and args.cv_candidates:
            # The sandbox table (issue: speedup spread over repeated evaluations): more warm passes over a spread
            # subset, one candidate after another, so every evaluation has the GPU to itself.
            subset = items[: args.cv_candidates]
            for _ in range(args.cv_repeats - ran):
                for name, task, program in subset:
                    evaluations[name].append(asyncio.run(ex.evaluate(task, program)))
            builds = {
                name: {
                    "build_cold_s": sum(b.seconds for b in evaluations[name][0].builds),
                    "build_cached_s": statistics.median(v.durations.build_s for v in evaluations[name][1:])
                    if len(evaluations[name]) > 1
                    else None,
                    "split": any(b.split_sources for b in evaluations[name][0].builds),
                }
                for name, _, _ in subset
            }
            records = candidate_records(subset, evaluations, builds)
            title = f"sandbox: {len(records)} honest candidates x {len(evaluations[subset[0][0]])} evaluations"
            report["sandbox"] = {"summary": print_candidate_table(title, records), "candidates": records}
            write_json(args.out, report)
        asyncio.run(ex.close())

    rows = [
        [k, str(v["candidates"]), fmt(v["wall_s"], ".0f"), fmt(v["per_hour"], ".0f")]
        for k, v in report.items()
        if isinstance(v, dict) and "per_hour" in v
    ]
    base = report.get("a_kernelbench_style", {}).get("per_hour")
    for r in rows:
        r.append(fmt(float(r[3]) / base, ".1f") + "x" if base else "-")
    if rows:
        print_table("candidates per hour", ["mode", "candidates", "wall s", "per hour", "vs (a)"], rows)

    rows_agree = [agreement(r, evaluations[r["candidate"]]) for r in kb if evaluations.get(r["candidate"])]
    if rows_agree:
        report["agreement"] = rows_agree
        print_table(
            "(a) KernelBench-style vs the executor ((b), then the warm passes)",
            ["candidate", "(a) status", "(b) status", "(a) speedup", "(b) speedup", "executor CV %", "(a) in noise"],
            [
                [
                    a["candidate"],
                    a["a_status"],
                    a["b_status"],
                    fmt(a["a_speedup"], ".3f"),
                    fmt(a["b_speedup"], ".3f"),
                    fmt(a["executor_speedup_cv"] and 100 * a["executor_speedup_cv"], ".2f"),
                    {True: "yes", False: "no", None: "-"}[a["a_within_noise"]],
                ]
                for a in rows_agree
            ],
        )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
