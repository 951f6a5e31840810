"""Evaluation throughput on a GPU host: candidates per hour, and the build-time cuts one by one.

    python scripts/bench_throughput.py --problems problems.jsonl --out runs/bench_throughput.json [--n 36]

(cuts) median build seconds of the same extensions built four ways: torch's default load_inline (a fresh
       process, its own build directory); the evaluator's build with no source split and no PCH; with the
       split (torch glue out of the .cu); with the split and the shared precompiled torch/extension.h.
(a)    one candidate at a time, each built and evaluated in a fresh process the way KernelBench's scripts do
       it (scripts/kernelbench_style_eval.py), on the first --kb-baseline candidates;
(b)    the local executor on all candidates at once, cold build cache;
(c)    the same again, warm cache (builds and per-task baselines reused).
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

from benchlib import DEFAULT_CANDIDATES, REPO, default_problems, discover, fmt, print_table, spread, write_json

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build import Builder
from rubric_rl.sandbox.evaluate import Evaluator
from rubric_rl.sandbox.executors import ExecutorConfig
from rubric_rl.sandbox.executors.local import LocalExecutor, visible_gpus
from rubric_rl.sandbox.extension import prepare_build

DEFAULT_BUILD_SCRIPT = """
import sys, time, torch
from torch.utils.cpp_extension import load_inline
import json
spec = json.loads(sys.stdin.read())
t = time.monotonic()
load_inline(name=spec["name"], cpp_sources=spec["cpp_sources"], cuda_sources=spec["cuda_sources"] or None,
            functions=spec["functions"], extra_cuda_cflags=spec["extra_cuda_cflags"], extra_cflags=spec["extra_cflags"],
            extra_ldflags=spec["extra_ldflags"], build_directory=sys.argv[1])
print(time.monotonic() - t)
"""


def build_cuts(items: list[tuple], arch: str, workers: int) -> dict[str, list[float | None]]:
    """Seconds per build for each way of building, same extensions, builds of one variant run in parallel."""
    ev = Evaluator(SandboxConfig(backend="cuda", cache_dir=Path(tempfile.mkdtemp()) / "build"))
    specs = []
    for _, _, program in items:
        found, _ = ev.capture(program)
        specs.extend(found)

    def torch_default(spec) -> float:
        d = tempfile.mkdtemp(prefix="default-build-")
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": d}
        env.pop("TORCH_CUDA_ARCH_LIST", None)
        started = time.monotonic()  # the whole process, like the evaluator's build jobs (torch import included)
        proc = subprocess.run(
            [sys.executable, "-c", DEFAULT_BUILD_SCRIPT, d],
            input=spec.model_dump_json(),
            text=True,
            env=env,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            print(f"torch default build of {spec.name} failed: {proc.stderr[-500:]}", file=sys.stderr)
            return None
        return time.monotonic() - started

    def ours(split: bool, pch: bool):
        builder = Builder(Path(tempfile.mkdtemp(prefix="cut-")), use_pch=pch)
        cfg = SandboxConfig(backend="cuda", split_sources=split)
        if pch:  # the PCH is built once per machine: build it before timing, as a long-running service would
            builder.build(prepare_build(specs[0], cfg, arch))

        def one(spec) -> float | None:
            prepared = prepare_build(spec.model_copy(update={"name": spec.name + "_cut"}), cfg, arch)
            outcome = builder.build(prepared)
            if not outcome.ok:
                print(f"build of {spec.name} (split={split}, pch={pch}) failed: {outcome.digest}", file=sys.stderr)
                return None
            return outcome.seconds

        return one

    variants = {
        "torch default load_inline": torch_default,
        "evaluator, no split, no PCH": ours(False, False),
        "evaluator + split": ours(True, False),
        "evaluator + split + PCH": ours(True, True),
    }
    out: dict[str, list[float | None]] = {}
    for name, fn in variants.items():
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


async def run_executor(ex: LocalExecutor, items: list[tuple]) -> tuple[list, float]:
    started = time.monotonic()
    verdicts = await asyncio.gather(*(ex.evaluate(task, program) for _, task, program in items))
    return verdicts, time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_throughput.json"))
    ap.add_argument("--n", type=int, default=36)
    ap.add_argument("--kb-baseline", type=int, default=4)
    ap.add_argument("--cut-candidates", type=int, default=8)
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--build-workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip", default="", help="comma list of phases to skip: cuts,a,b,c")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    from rubric_rl.tasks import load_tasks

    problems = args.problems or default_problems()
    tasks = {t.id: t for t in load_tasks(problems)}
    chosen = spread(discover(args.candidates, tasks), args.n)
    items = [(path.stem, tasks[tid], path.read_text()) for tid, path in chosen]
    gpus = visible_gpus()
    arch = gpus[0]["arch"] if gpus else "9.0"
    report: dict = {"candidates": len(items), "gpu": gpus[0]["name"] if gpus else None, "cores": os.cpu_count()}

    if "cuts" not in skip:
        cuts = build_cuts(items[: args.cut_candidates], arch, min(args.build_workers, 8))
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
            "median build seconds, same extensions",
            ["build", "median s", "n", "failed"],
            [[k, fmt(v["median_s"], ".1f"), str(v["n"]), str(v["failed"])] for k, v in report["build_cuts"].items()],
        )

    kb = []
    if "a" not in skip:
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

    sandbox = SandboxConfig(
        backend="cuda", cache_dir=Path(tempfile.mkdtemp(prefix="bench-tp-")) / "build", perf_trials=args.perf_trials
    )
    ex = LocalExecutor(sandbox, ExecutorConfig(build_workers=args.build_workers))
    verdicts_b = []
    for phase in ("b", "c"):
        if phase in skip:
            continue
        verdicts, wall = asyncio.run(run_executor(ex, items))
        if phase == "b":
            verdicts_b = verdicts
        report[f"{phase}_executor_{'cold' if phase == 'b' else 'warm'}"] = {
            "candidates": len(items),
            "wall_s": wall,
            "per_hour": 3600 * len(items) / wall,
            "statuses": {s: sum(v.status == s for v in verdicts) for s in sorted({v.status for v in verdicts})},
            "median_build_s": statistics.median([b.seconds for v in verdicts for b in v.builds if not b.cached] or [0]),
            "executor": ex.stats(),
        }
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
    print_table("candidates per hour", ["mode", "candidates", "wall s", "per hour", "vs (a)"], rows)

    agreement = []
    by_name = {name: v for (name, _, _), v in zip(items, verdicts_b, strict=False)}
    for r in kb:
        v = by_name.get(r["candidate"])
        if v is None:
            continue
        kb_status = "correct" if r.get("correct") else ("incorrect" if r.get("compiled") else "compile_error")
        agreement.append(
            {
                "candidate": r["candidate"],
                "a_status": kb_status,
                "b_status": v.status,
                "a_speedup": r.get("speedup"),
                "b_speedup": v.speedup_eager,
                "b_speedup_cv": v.timings.candidate.cv if v.timings and v.timings.candidate else None,
            }
        )
    if agreement:
        report["agreement"] = agreement
        print_table(
            "(a) KernelBench-style vs (b) executor",
            ["candidate", "(a) status", "(b) status", "(a) speedup", "(b) speedup"],
            [
                [a["candidate"], a["a_status"], a["b_status"], fmt(a["a_speedup"], ".3f"), fmt(a["b_speedup"], ".3f")]
                for a in agreement
            ],
        )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
