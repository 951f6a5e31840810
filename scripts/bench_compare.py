"""Seconds the evaluator spends judging one output on the host: the comparison of a candidate's output with the
reference's (``correctness.compare_tensor``) and the degenerate-task check on the reference's outputs
(``correctness.degenerate_task_flags``, two trials).

    python scripts/bench_compare.py [--sizes-m 16,64] [--repeats 3] [--threads N] [--nan] [--processes P]
        [--concurrent K] [--out runs/bench_compare.json]

``--nan``: the candidate is all NaN (the comparison's general path, which a wrong kernel takes). ``--processes``:
that many copies of the measurement at once, each its own process (several evaluators on one host: gpu test
processes side by side, or executors), reported per process. ``--concurrent``: that many Python threads of this
process compare at once, each its own pair (one executor's slots), the compare column is then the median over
the threads of each one's seconds per comparison.

Sizes are millions of float32 elements (64M is a Level 1 output after KernelBench enlarged its problems); the
candidate is the reference plus noise well inside the tolerance, so every element is compared and passes. An
evaluation compares 11 such outputs (5 task trials, 2 other distributions, 4 checked timing rounds) and checks
the reference once per task; with 4 slots sharing a GPU, 4 evaluations compare at once on the host's cores.
The script only calls the module's public functions, so it measures any commit of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

import torch
from benchlib import fmt, print_table, write_json

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.measure.correctness import compare_tensor, degenerate_task_flags, tolerance_for


def seconds(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-m", default="16,64")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--nan", action="store_true", help="an all-NaN candidate (the general path)")
    ap.add_argument("--processes", type=int, default=1, help="copies measuring at once, one process each")
    ap.add_argument("--concurrent", type=int, default=1, help="threads of this process comparing at once")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_compare.json"))
    args = ap.parse_args()
    if args.processes > 1:
        side_by_side(args)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = SandboxConfig(backend="cpu")
    tol = tolerance_for(torch.float32, cfg)
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    report: dict = {"commit": commit, "threads": torch.get_num_threads(), "cores": os.cpu_count(), "results": []}
    rows = []
    gen = torch.Generator().manual_seed(0)
    for m in (int(s) for s in args.sizes_m.split(",")):
        ref = torch.randn(m << 20, generator=gen)
        cand = torch.full_like(ref, float("nan")) if args.nan else ref + 1e-7 * torch.randn(m << 20, generator=gen)
        other = torch.randn(m << 20, generator=gen)
        result = compare_tensor(cand, ref, tol, cfg.atol_scale)
        assert result[0] == (ref.numel() if args.nan else 0), result
        if args.concurrent > 1:
            compare_s = side_by_side_threads(cand, ref, tol, cfg.atol_scale, args.concurrent, args.repeats)
        else:
            compare_s = seconds(lambda: compare_tensor(cand, ref, tol, cfg.atol_scale), args.repeats)  # noqa: B023
        flags_s = seconds(lambda: degenerate_task_flags([[ref], [other]], cfg), args.repeats)  # noqa: B023
        med = {"compare": statistics.median(compare_s), "flags": statistics.median(flags_s)}
        report["results"].append(
            {"m_elements": m, "compare_s": compare_s, "flags_s": flags_s, "median_s": med, "result": list(result)}
        )
        rows.append(
            [str(m), fmt(med["compare"], ".3f"), fmt(m * 4 / 1024 / med["compare"], ".2f"), fmt(med["flags"], ".3f")]
        )
        write_json(args.out, report)
    print_table(
        f"host comparison at {commit}{', NaN candidate' if args.nan else ''}, median of {args.repeats} "
        f"({torch.get_num_threads()} threads{f', {args.concurrent} comparing at once' if args.concurrent > 1 else ''})",
        ["M float32", "compare s", "GB/s (one tensor)", "degenerate check s"],
        rows,
    )


def side_by_side_threads(
    cand: torch.Tensor, ref: torch.Tensor, tol, atol_scale: float | None, k: int, repeats: int
) -> list[float]:
    """Seconds per comparison of each of ``k`` threads comparing its own copy of the pair at once."""
    pairs = [(cand.clone(), ref.clone()) for _ in range(k)]
    per_thread: list[float] = [0.0] * k
    start = threading.Barrier(k)

    def work(i: int) -> None:
        start.wait()
        per_thread[i] = statistics.median(seconds(lambda: compare_tensor(*pairs[i], tol, atol_scale), repeats))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per_thread


def side_by_side(args: argparse.Namespace) -> None:
    """``args.processes`` copies of this script at once; their medians, per process, in one table and JSON."""
    import sys

    argv = [a for a in sys.argv[1:]]
    i = argv.index("--processes") if "--processes" in argv else -1
    if i >= 0:
        del argv[i : i + 2]
    argv = [a for a in argv if not a.startswith("--processes=")]
    outs = [args.out.with_name(f"{args.out.stem}.p{k}.json") for k in range(args.processes)]
    procs = [
        subprocess.Popen([sys.executable, __file__, *argv, "--out", str(out)], stdout=subprocess.DEVNULL)
        for out in outs
    ]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a measuring process failed")
    reports = [json.loads(out.read_text()) for out in outs]
    rows = [
        [str(k), str(r["m_elements"]), fmt(r["median_s"]["compare"], ".3f"), fmt(r["median_s"]["flags"], ".3f")]
        for k, rep in enumerate(reports)
        for r in rep["results"]
    ]
    write_json(args.out, {"processes": args.processes, "nan": args.nan, "reports": reports})
    print_table(
        f"host comparison at {reports[0]['commit']}, {args.processes} processes at once"
        f"{', NaN candidate' if args.nan else ''} ({reports[0]['threads']} threads each)",
        ["process", "M float32", "compare s", "degenerate check s"],
        rows,
    )


if __name__ == "__main__":
    main()
