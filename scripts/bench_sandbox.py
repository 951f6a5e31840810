"""Sandbox benchmark on a GPU: per honest candidate, build seconds (cold and cached), correctness and timing
seconds, speedups over eager and torch.compile, and the speedup's spread over repeated evaluations.

    python scripts/bench_sandbox.py --problems problems.jsonl --out runs/bench_sandbox.json [--n 14 --repeats 5]
        [--only L2-22,L3-34,...] [--slots-per-gpu 4]

Candidates are benchmarks/kernelbench/<task id>_*.py (honest programs for real KernelBench problems). Builds
go into a fresh cache; the evaluations go through the local executor (warm workers, per-task baselines: eager
is re-timed beside every candidate, torch.compile is timed once per task). Each repeat is one pass over all
candidates at once (the executor times one at a time, each alone on the GPU); the report is written after
every pass, so a run cut short keeps the passes it finished. Passes after the first have a warm build cache
and measured baselines: their rate is the warm-cache rate for these candidates.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchlib import (
    DEFAULT_CANDIDATES,
    candidate_records,
    default_problems,
    discover,
    disturbed_timings,
    print_candidate_table,
    run_logged,
    sandbox_overrides,
    select,
    stage_means,
    write_json,
)

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build.extension import prepare_build
from rubric_rl.sandbox.executors import ExecutorConfig
from rubric_rl.sandbox.executors.local import LocalExecutor
from rubric_rl.tasks import load_tasks


def build_times(ex: LocalExecutor, program: str) -> dict:
    """Capture, then build cold, then build again (cached), timing each step."""
    t0 = time.monotonic()
    specs, error = ex.evaluator.capture(program)
    capture_s = time.monotonic() - t0
    cold = cached = 0.0
    ok, split = True, False
    for spec in specs:
        prepared = prepare_build(spec, ex.sandbox, ex.arch)
        split = split or prepared.split_sources
        t1 = time.monotonic()
        outcome = ex.builder.build(prepared, candidate=program)
        cold += time.monotonic() - t1
        t2 = time.monotonic()
        ex.builder.build(prepared, candidate=program)
        cached += time.monotonic() - t2
        ok = ok and outcome.ok
    return {
        "capture_s": capture_s,
        "build_cold_s": cold,
        "build_cached_s": cached,
        "build_ok": ok and bool(specs),
        "split": split,
        "capture_error": error,
    }


def report(
    ex: LocalExecutor,
    items: list[tuple],
    verdicts: dict[str, list],
    builds: dict,
    passes: list[dict],
    args: argparse.Namespace,
    build_wall: float,
) -> None:
    done = [it for it in items if verdicts[it[0]]]
    records = candidate_records(done, verdicts, builds)
    summary = print_candidate_table(
        f"bench_sandbox: {len(records)} honest candidates x {len(passes)} evaluations", records
    )
    warm = passes[1:]
    warm_n, warm_s = sum(p["evaluations"] for p in warm), sum(p["wall_s"] for p in warm)
    summary.update(
        repeats=len(passes),
        perf_trials=args.perf_trials,
        slots_per_gpu=args.slots_per_gpu,
        build_wall_s=build_wall,
        passes=passes,
        warm_per_hour=round(3600 * warm_n / warm_s, 1) if warm_s else None,
        executor=ex.stats(),
    )
    if warm_s:
        print(f"warm passes: {warm_n} evaluations in {warm_s:.0f} s = {summary['warm_per_hour']}/hour", flush=True)
    write_json(args.out, {"summary": summary, "candidates": records})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_sandbox.json"))
    ap.add_argument("--n", type=int, default=14)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--build-workers", type=int, default=8)
    ap.add_argument("--slots-per-gpu", type=int, default=ExecutorConfig().slots_per_gpu)
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--only", default=None, help="comma-separated candidate names or task ids (else --n spread)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="a SandboxConfig field, e.g. timing.l2_flush=false",
    )
    args = ap.parse_args()

    tasks = {t.id: t for t in load_tasks(args.problems or default_problems())}
    chosen = select(discover(args.candidates, tasks), args.n, args.only)
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="bench-sandbox-")) / "build"
    sandbox = SandboxConfig(backend="cuda", build={"cache_dir": cache}, timing={"trials": args.perf_trials}).updated(
        **sandbox_overrides(args.set)
    )
    ex = LocalExecutor(
        sandbox, ExecutorConfig(build_workers=args.build_workers, prebuild=True, slots_per_gpu=args.slots_per_gpu)
    )
    items = [(path.stem, tasks[tid], path.read_text()) for tid, path in chosen]

    started = time.monotonic()
    with ThreadPoolExecutor(args.build_workers) as pool:
        builds = dict(zip([i[0] for i in items], pool.map(lambda it: build_times(ex, it[2]), items), strict=True))
    build_wall = time.monotonic() - started
    write_json(args.out, {"build_wall_s": build_wall, "builds": builds})  # kept if the evaluations fail
    print(f"built {len(items)} candidates in {build_wall:.0f} s", flush=True)
    verdicts: dict[str, list] = {name: [] for name, _, _ in items}
    passes: list[dict] = []
    log = args.out.with_name(args.out.stem + "_verdicts.jsonl")
    for r in range(args.repeats):  # passes outermost, so slow drift falls on every candidate alike
        got, wall = asyncio.run(run_logged(ex, items, log, started))
        for (name, _, _), v in zip(items, got, strict=True):
            verdicts[name].append(v)
        passes.append(
            {
                "pass": r,
                "evaluations": len(got),
                "wall_s": round(wall, 2),
                "stage_means_s": stage_means(got),
                "gates": ex.stats()["gates"],
                "disturbed_timings": disturbed_timings([(n, v) for (n, _, _), v in zip(items, got, strict=True)]),
            }
        )
        print(
            f"pass {r}: {len(got)} evaluations in {wall:.0f} s, {len(passes[-1]['disturbed_timings'])} timings "
            f"disturbed; mean stage s {stage_means(got)}",
            flush=True,
        )
        report(ex, items, verdicts, builds, passes, args, build_wall)
    asyncio.run(ex.close())


if __name__ == "__main__":
    main()
