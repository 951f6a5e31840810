"""Seconds per stage of one Evaluator (no executor) evaluating one candidate again and again on a warm cache.

Self-contained (no benchlib, only rubric_rl's oldest public API), so that it runs against any tree of the package:
run it from the tree's root with the tree on PYTHONPATH (the sandbox's own processes find the package from their
working directory) to compare two trees' evaluation paths on one machine, alternating them:

    bench=$PWD/scripts/bench_evaluator.py
    for tree in old new new old; do
      dir=$([[ $tree == new ]] && echo $PWD || echo $PWD/.device/old)
      (cd "$dir" && PYTHONPATH=$dir RUBRIC_RL_CACHE=/tmp/bench-eval-$tree python "$bench" --out /tmp/bench-eval.json)
    done

The first evaluation (builds, the worker's first imports) is not counted. cpu: the bundled fused add + ReLU; any
other pair with --reference/--candidate (cuda: --device cuda). Prints the median of each stage and writes every
evaluation's stages as JSON (appended to --out's list, one entry per run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fused_add_relu"
STAGES = ("reference_s", "load_s", "correctness_s", "compile_s", "timing_wall_s", "teardown_s", "total_s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5, help="evaluations counted, after one not counted")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--reference", type=Path, default=EXAMPLE / "reference.py")
    ap.add_argument("--candidate", type=Path, default=EXAMPLE / "candidate_correct.py")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_evaluator.json"))
    args = ap.parse_args()

    import rubric_rl
    from rubric_rl.sandbox import Evaluator, SandboxConfig

    tree = str(Path(rubric_rl.__file__).resolve().parents[1])
    reference, candidate = args.reference.read_text(), args.candidate.read_text()
    evaluator = Evaluator(SandboxConfig(backend=args.device))
    first = evaluator.evaluate(reference, candidate, task_id="first")
    rows = []
    for _ in range(args.n):
        started = time.monotonic()
        v = evaluator.evaluate(reference, candidate, task_id="bench")
        rows.append({"wall_s": time.monotonic() - started, "status": v.status, **v.durations.model_dump()})
    medians = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in ("wall_s", *STAGES)}
    print(f"{tree}: first evaluation {first.status}, then {[r['status'] for r in rows]}")
    print(" ".join(f"{k:>14}" for k in medians))
    print(" ".join(f"{x:>14.3f}" for x in medians.values()))
    runs = json.loads(args.out.read_text()) if args.out.exists() else []
    runs.append({"tree": tree, "device": args.device, "medians": medians, "evaluations": rows})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
