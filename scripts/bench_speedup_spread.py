"""Spread of one candidate's speedup over repeated evaluations, by two estimators on the same timed rounds.

    python scripts/bench_speedup_spread.py [--reference examples/fused_add_relu/reference.py]
        [--candidate examples/fused_add_relu/candidate_correct.py] [--device cpu] [--repeats 10]
        [--perf-trials 100] [--load N] [--set FIELD=VALUE ...] [--out runs/bench_speedup_spread.json]

Each evaluation is a fresh worker of the sandbox's ``Evaluator``, one after another. From each Verdict's
``timings.rounds_ms`` the speedup over eager is computed two ways: the ratio of the two models' medians (what
Verdicts report) and the median of per-round ratios (``timing.paired_ratio``, the alternative measured).
The table gives each estimator's coefficient of variation over the evaluations. ``--load N`` keeps N
busy processes running beside the evaluations, as a host shared with compilers is (the executor's builds run
beside its timing). A third row, the CV within one evaluation (its rounds in quarters, see
``benchlib.within_evaluation_cv``), tells sampling noise from a level each worker process has of its own;
``--set worker_aslr=false`` is the experiment against the latter.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, cv, fmt, print_table, sandbox_overrides, within_evaluation_cv, write_json

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.measure.timing import paired_ratio

EXAMPLE = REPO / "examples" / "fused_add_relu"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, default=EXAMPLE / "reference.py")
    ap.add_argument("--candidate", type=Path, default=EXAMPLE / "candidate_correct.py")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the evaluations")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_speedup_spread.json"))
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a SandboxConfig field")
    args = ap.parse_args()

    config = SandboxConfig(
        backend=args.device,
        cache_dir=Path(tempfile.mkdtemp(prefix="bench-spread-")) / "build",
        perf_trials=args.perf_trials,
        compile_baseline=False,
        **sandbox_overrides(args.set),
    )
    evaluator = Evaluator(config)
    reference, candidate = args.reference.read_text(), args.candidate.read_text()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    rows: list[dict] = []
    try:
        for i in range(args.repeats):
            started = time.monotonic()
            v = evaluator.evaluate(reference, candidate)
            if v.status != "correct" or v.timings is None:
                raise SystemExit(f"evaluation {i}: {v.status}: {v.errors[:2]}")
            rounds = v.timings.rounds_ms
            rows.append(
                {
                    "paired": paired_ratio(rounds["eager"], rounds["candidate"]),
                    "of_medians": statistics.median(rounds["eager"]) / statistics.median(rounds["candidate"]),
                    "eager_median_ms": statistics.median(rounds["eager"]),
                    "candidate_median_ms": statistics.median(rounds["candidate"]),
                    "within_cv": within_evaluation_cv(rounds["eager"], rounds["candidate"]),
                    "seconds": time.monotonic() - started,
                }
            )
            print(f"evaluation {i}: paired {rows[-1]['paired']:.4f}, of medians {rows[-1]['of_medians']:.4f}")
    finally:
        for p in busy:
            p.kill()
            p.wait()

    summary = {
        estimator: {
            "median": statistics.median(r[estimator] for r in rows),
            "cv": cv([r[estimator] for r in rows]),
        }
        for estimator in ("paired", "of_medians")
    }
    within = [r["within_cv"] for r in rows if r["within_cv"] is not None]
    summary["within_one"] = {"median_cv": statistics.median(within) if within else None}
    print_table(
        f"speedup vs eager over {len(rows)} evaluations ({args.device}, {args.perf_trials} rounds each, "
        f"{args.load} busy processes beside{', ' + ' '.join(args.set) if args.set else ''})",
        ["estimator", "median speedup", "CV %"],
        [
            [
                "median of per-round ratios",
                fmt(summary["paired"]["median"], ".3f"),
                fmt(100 * summary["paired"]["cv"], ".2f"),
            ],
            [
                "ratio of medians (reported)",
                fmt(summary["of_medians"]["median"], ".3f"),
                fmt(100 * summary["of_medians"]["cv"], ".2f"),
            ],
            [
                "ratio of medians, within one evaluation (median over them)",
                "-",
                fmt(100 * summary["within_one"]["median_cv"] if within else None, ".2f"),
            ],
        ],
    )
    write_json(args.out, {"args": vars(args), "summary": summary, "evaluations": rows})


if __name__ == "__main__":
    main()
