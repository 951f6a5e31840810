"""What the agent's tools cost: latency per tool call, and a scripted 10-turn trajectory end to end.

    python scripts/bench_agent_tools.py --device cpu --out runs/bench_agent_tools_cpu.json
    python scripts/bench_agent_tools.py --device cuda --task L1-19 --out runs/bench_agent_tools_cuda.json

(calls)       ``--sessions`` tool sessions on one task, each: write a broken program (a ``#error`` in its
              sources), compile (the compiler's error), write the honest program, compile, check (the
              evaluation), benchmark and profile (the same evaluation, read again), an unknown tool and malformed
              arguments (tool errors), submit. The first session runs on a fresh build cache (cold builds),
              the later ones on the cache it filled (warm), which is how a training run meets the tools.
(trajectory)  10 turns of one scripted agent through ``ToolSession`` (the calls verl's agent loop would make for
              that model), then the final reward: a fresh evaluation through ``rubric_rl.reward.verl.
              compute_score``. No model and no verl: the time is the environment's.

cpu: the bundled example (a fused add + ReLU, C++/OpenMP). cuda: a KernelBench task (``--task``) and its
candidate from benchmarks/kernelbench. A table per phase, and ``--out`` JSON with every call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import DEFAULT_CANDIDATES, REPO, default_problems, discover, fmt, print_table, write_json

REWARD_KWARGS: dict[str, Any] = {"rule": {"name": "milestone"}, "mix": {"name": "none"}}


def broken(program: str) -> str:
    """The program with a compile error (a ``#error`` after its first torch/extension.h include)."""
    out, n = re.subn(r"(#include <torch/extension\.h>)", r"\1\n#error deliberately broken", program, count=1)
    if not n:
        raise SystemExit("the candidate has no '#include <torch/extension.h>' to break")
    return out


def pick(device: str, task_id: str | None, problems: str | None) -> tuple[Any, str]:
    """(task, honest program) for the device."""
    from rubric_rl.tasks import Task, load_tasks

    if device == "cpu":
        example = REPO / "examples" / "fused_add_relu"
        task = Task(
            id="fused_add_relu",
            problem_id=0,
            name="fused_add_relu",
            origin="examples",
            code=(example / "reference.py").read_text(),
        )
        return task, (example / "candidate_correct.py").read_text()
    tasks = {t.id: t for t in load_tasks(problems or default_problems())}
    found = [(tid, path) for tid, path in discover(DEFAULT_CANDIDATES, tasks) if task_id in (None, tid)]
    if not found:
        raise SystemExit(f"no candidate in {DEFAULT_CANDIDATES} for task {task_id}")
    tid, path = found[0]
    return tasks[tid], path.read_text()


SESSION = [  # (label, tool, arguments); "$broken" and "$honest" name the programs
    ("write_program", "write_program", {"program": "$broken"}),
    ("compile (compile error)", "compile", {}),
    ("write_program", "write_program", {"program": "$honest"}),
    ("compile (builds)", "compile", {}),
    ("check (evaluates)", "check", {}),
    ("benchmark (same evaluation)", "benchmark", {}),
    ("profile (same evaluation)", "profile", {}),
    ("unknown tool", "frobnicate", {}),
    ("malformed arguments", "check", "{not json"),
    ("submit", "submit", {}),
]

TRAJECTORY = [  # one list of calls per turn: 10 turns
    [("write_program", {"program": "$broken"})],
    [("compile", {})],
    [("write_program", {"program": "$honest"}), ("compile", {})],
    [("check", {})],
    [("benchmark", {})],
    [("profile", {})],
    [("frobnicate", {})],
    [("check", {"verbose": True})],
    [("check", {})],
    [("submit", {})],
]


def arguments(args: Any, programs: dict[str, str]) -> Any:
    if isinstance(args, dict):
        return {k: programs.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
    return args


async def run_calls(task: Any, programs: dict[str, str], sessions: int, config: Any, tools: Any) -> list[dict]:
    from rubric_rl.agents import ToolSession

    rows = []
    for i in range(sessions):
        session = ToolSession(task, tools, config)
        for label, name, args in SESSION:
            result = await session.call(name, arguments(args, programs))
            record = session.records[-1]
            cache = "cold" if i == 0 else "warm"
            # The text the model reads, so that a report can show it (the profile's Nsight Compute lines above all).
            row = {"session": i, "cache": cache, "label": label, **record.model_dump(mode="json"), "text": result.text}
            rows.append(row)
            print(
                f"session {i} {name:<13} {record.latency_s:8.2f} s  {result.error or result.status or 'ok'}", flush=True
            )
    return rows


async def run_trajectory(task: Any, programs: dict[str, str], config: Any, tools: Any) -> dict:
    from rubric_rl.agents import ToolSession, final_reward

    session = ToolSession(task, tools, config)
    started = time.monotonic()
    turns = []
    for i, calls in enumerate(TRAJECTORY, 1):
        t = time.monotonic()
        for name, args in calls:
            await session.call(name, arguments(args, programs))
        turns.append({"turn": i, "calls": [c[0] for c in calls], "seconds": time.monotonic() - t})
    tools_s = time.monotonic() - started
    program, source = session.final_program("last_written")
    t = time.monotonic()
    reward = await final_reward(
        program,
        source,
        data_source="bench",
        reference=task.code,
        extra_info={"task_id": task.id},
        reward_kwargs=REWARD_KWARGS,
        turns=len(TRAJECTORY),
        tool_calls=len(session.records),
        tool_errors=sum(not r.ok for r in session.records),
    )
    reward_s = time.monotonic() - t
    return {
        "turns": turns,
        "tools_s": tools_s,
        "final_reward_s": reward_s,
        "total_s": time.monotonic() - started,
        "score": reward.score,
        "reward_info": reward.info,
        "records": [r.model_dump(mode="json") for r in session.records],
    }


def latency_table(rows: list[dict]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for cache in ("cold", "warm"):
        for label in dict.fromkeys(r["label"] for r in rows):
            mine = [r for r in rows if r["label"] == label and r["cache"] == cache]
            if mine:
                lat = [r["latency_s"] for r in mine]
                out = [r["output_chars"] for r in mine]
                summary[f"{label}, {cache}"] = {
                    "calls": len(lat),
                    "median_s": statistics.median(lat),
                    "max_s": max(lat),
                    "output_chars": statistics.mean(out),
                }
    print_table(
        "tool-call latency",
        ["call, cache", "calls", "median s", "max s", "output chars"],
        [
            [k, str(v["calls"]), fmt(v["median_s"], ".3f"), fmt(v["max_s"], ".3f"), fmt(v["output_chars"], ".0f")]
            for k, v in summary.items()
        ],
    )
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="sandbox backend of the tools")
    ap.add_argument("--task", default=None, help="cuda: KernelBench task id with a candidate (default: the first)")
    ap.add_argument("--problems", default=None, help="cuda: KernelBench problems.jsonl")
    ap.add_argument("--sessions", type=int, default=3, help="tool sessions in the calls phase (the first is cold)")
    ap.add_argument("--cache-dir", default=None, help="build cache (default: a fresh temporary one)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()

    os.environ["RUBRIC_RL_CACHE"] = args.cache_dir or tempfile.mkdtemp(prefix="bench-agent-tools-")
    from rubric_rl.agents import ToolsConfig, get_sandbox_tools
    from rubric_rl.agents.backend import final_sandbox_seed

    task, honest = pick(args.device, args.task, args.problems)
    programs = {"$broken": broken(honest), "$honest": honest}
    config = ToolsConfig(backend=args.device)
    tools = get_sandbox_tools(config, final_sandbox_seed(REWARD_KWARGS, args.device))
    started = time.monotonic()
    rows = asyncio.run(run_calls(task, programs, args.sessions, config, tools))
    summary = latency_table(rows)
    trajectory = asyncio.run(run_trajectory(task, programs, config, tools))
    print_table(
        "10-turn trajectory (warm cache)",
        ["turn", "calls", "seconds"],
        [[str(t["turn"]), " + ".join(t["calls"]), fmt(t["seconds"], ".2f")] for t in trajectory["turns"]]
        + [
            ["", "final reward (fresh evaluation)", fmt(trajectory["final_reward_s"], ".2f")],
            ["", f"total; score {trajectory['score']:g}", fmt(trajectory["total_s"], ".2f")],
        ],
    )
    if args.out:
        write_json(
            args.out,
            {
                "device": args.device,
                "task": task.id,
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "tools_seed": tools.seed,
                "wall_s": time.monotonic() - started,
                "latency": summary,
                "calls": rows,
                "trajectory": trajectory,
            },
        )


if __name__ == "__main__":
    main()
