"""A KernelBench Level 3 rollout with a scripted coder, its report, and the time per task by stage.

The planner and coder are a scripted OpenAI-protocol server on 127.0.0.1 (tests/stub_server.py): the planner
answers one generic plan, the coder answers with the repository's benchmark candidate for the task
(benchmarks/kernelbench/L3-<id>_*.py) when there is one, and with an answer holding no program when there is
none, on every turn. So the loop, the sandbox, the Verifier and the report all run for real on real programs,
and only the models are stand-ins. Writes, under --out: run/ (the rollout's records), report/ (rubric-rl report)
and bench.json (seconds per task by stage, per task and in total).

    python scripts/bench_rollout.py --tasks /path/to/problems.jsonl --device cuda --out runs/bench-rollout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from stub_server import Reply, StubOpenAIServer  # noqa: E402

PLAN = {
    "summary": "Replace the reference's operators with fused custom kernels, one per fusion group.",
    "bottlenecks": [{"op": "the largest operators of the profile", "reason": "memory traffic between operators"}],
    "fusion_groups": [{"name": "fused_forward", "ops": ["every operator of the forward"], "boundary": "the output"}],
    "tensors": [],
    "orchestration": {"launch": "one thread per output element, 256 threads per block", "cuda_graphs": False},
    "risks": ["accumulate reductions in float32"],
}


def candidates(ids: list[str]) -> dict[str, Path]:
    """Task id -> the benchmark candidate for it (benchmarks/kernelbench/L3-<n>_name.py)."""
    out = {}
    for path in sorted((REPO / "benchmarks" / "kernelbench").glob("L*-*_*.py")):
        task_id = path.name.split("_", 1)[0]
        if task_id in ids:
            out[task_id] = path
    return out


class ScriptedCoder:
    """Answers as the planner or the coder of the task whose reference the prompt holds."""

    def __init__(self, tasks: list[Any], programs: dict[str, Path]) -> None:
        self.references = [(t.code.strip(), t.id) for t in tasks]
        self.programs = {k: v.read_text() for k, v in programs.items()}

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        if "You are the Planner" in messages[0]["content"]:
            return Reply(content=json.dumps(PLAN), prompt_tokens=2000, completion_tokens=300)
        text = messages[-1]["content"]
        task_id = next((tid for ref, tid in self.references if ref in text), None)
        program = self.programs.get(task_id or "")
        if program is None:
            return Reply(content="I could not write this program.", prompt_tokens=3000, completion_tokens=10)
        return Reply(content=f"```python\n{program}```\n", prompt_tokens=3000, completion_tokens=2500)


def _interrupt(signum: int, frame: Any) -> None:
    """The first SIGTERM interrupts the run as Ctrl-C does; later ones (``timeout`` signals the process and then
    its group) are ignored, so the executor's shutdown and the report are not interrupted in turn."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def stage_table(results: list[Any]) -> dict[str, Any]:
    if not results:
        return {"per_task": {}, "total": {}, "mean_per_task": {}, "seconds_per_task": None}
    stages = sorted({k for r in results for k in r.stage_seconds})
    per_task = {r.task_id: {**{k: round(r.stage_seconds.get(k, 0.0), 3) for k in stages}, "total_s": r.seconds}
                for r in results}  # fmt: skip
    totals = {k: round(sum(r.stage_seconds.get(k, 0.0) for r in results), 3) for k in stages}
    means = {k: round(statistics.fmean(r.stage_seconds.get(k, 0.0) for r in results), 3) for k in stages}
    seconds = [r.seconds for r in results]
    return {
        "per_task": per_task,
        "total": totals,
        "mean_per_task": means,
        "seconds_per_task": {"mean": statistics.fmean(seconds), "median": statistics.median(seconds)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", required=True, help="Task source: a problems .jsonl, KernelBench checkout or hf:...")
    ap.add_argument("--ids", default="1-8,33,34", help="Level 3 problem ids (default: 10, five with a candidate).")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-turns", type=int, default=2, help="Coder turns per task.")
    ap.add_argument("--concurrency", type=int, default=2, help="Tasks in their loop at once.")
    ap.add_argument("--docs", type=Path, default=None, help="A local folder of NVIDIA docs for the Verifier.")
    ap.add_argument("--no-planner", action="store_true", help="The coder alone (no profile, no plan).")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    from rubric_rl.agents.pcv.config import load_rollout
    from rubric_rl.agents.pcv.run import run_rollout, select_tasks
    from rubric_rl.reports import build_report

    args.out.mkdir(parents=True, exist_ok=True)
    with StubOpenAIServer(model="scripted") as server:
        endpoint = {"base_url": server.url, "model": "scripted", "max_retries": 2}
        definition: dict[str, Any] = {
            "name": f"bench-level3-{args.device}",
            "device": args.device,
            "concurrency": args.concurrency,
            "tasks": {"source": args.tasks, "levels": [3], "ids": args.ids},
            "coder": {"endpoint": endpoint, "plan_prompt": "prompts/coder_plan.md"},
            "verifier": {"docs_dir": str(args.docs) if args.docs else None},
            "budgets": {"max_turns": args.max_turns},
        }
        if not args.no_planner:
            definition["planner"] = {
                "endpoint": endpoint,
                "system_prompt": "prompts/planner_system.md",
                "user_prompt": "prompts/planner_user.md",
            }
        run_file = args.out / "run.yaml"
        import yaml

        run_file.write_text(yaml.safe_dump(definition))
        config = load_rollout(run_file)
        tasks = select_tasks(config)
        programs = candidates([t.id for t in tasks])
        server.responder = ScriptedCoder(tasks, programs)
        logging.info("%d tasks, %d with a benchmark candidate: %s", len(tasks), len(programs), sorted(programs))
        started = time.monotonic()
        # A run cut short (SIGTERM from a time limit, or Ctrl-C) still reports the tasks that finished: their
        # records are written as each ends, and the same command resumes the rest.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            summary: dict[str, Any] | None = asyncio.run(run_rollout(config, tasks, args.out / "run", source=run_file))
        except KeyboardInterrupt:
            logging.warning("interrupted: reporting the tasks that finished (run the command again to resume)")
            summary = None
        wall = time.monotonic() - started
    report = build_report([args.out / "run"], args.out / "report")
    from rubric_rl.reports.load import load_run

    results = load_run(args.out / "run").results
    bench = {
        "device": args.device,
        "tasks": len(tasks),
        "with_candidate": sorted(programs),
        "wall_s": round(wall, 1),
        "complete": summary is not None,
        "finished": len(results),
        "run": summary,
        "stages": stage_table(results),
        "metrics": {
            track: {k: m[k] for k in ("correct_rate", "fast_p", "geomean_speedup")}
            for track, m in report["runs"][0]["tracks"].items()
        },  # fmt: skip
    }
    (args.out / "bench.json").write_text(json.dumps(bench, indent=2))
    print(json.dumps({k: bench[k] for k in ("device", "tasks", "wall_s", "stages", "metrics")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
