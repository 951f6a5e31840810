"""A rollout over a task set: bounded concurrency, every turn and every result appended as it exists, resumable.

The run directory holds ``turns.jsonl`` (every planner and coder turn, written and fsynced when it ends),
``results.jsonl`` (one row per finished task: its kept program's Verdict), ``config.json`` (the resolved run
definition) and ``summary.json``. A rerun with the same directory cuts a last line left half-written by a crash,
skips every task with a result, and resumes every other task from its recorded turns (``state.TaskState``): what
was recorded is neither lost nor redone; only a turn that was in flight when the process died runs again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from rubric_rl.agents.pcv.chat import ChatClient
from rubric_rl.agents.pcv.coder import Coder
from rubric_rl.agents.pcv.config import RolloutConfig
from rubric_rl.agents.pcv.loop import Roles, run_task
from rubric_rl.agents.pcv.planner import Planner
from rubric_rl.agents.pcv.records import TaskResult, Turn
from rubric_rl.agents.pcv.sandbox import SandboxGateway
from rubric_rl.agents.pcv.verifier import Verifier
from rubric_rl.tasks import Task, filter_tasks, load_tasks

log = logging.getLogger(__name__)

TURNS, RESULTS, CONFIG, SUMMARY = "turns.jsonl", "results.jsonl", "config.json", "summary.json"
M = TypeVar("M", bound=BaseModel)


def select_tasks(config: RolloutConfig) -> list[Task]:
    """The run's tasks: the source, filtered, in source order, the first ``limit``."""
    t = config.tasks
    tasks = filter_tasks(load_tasks(t.source), levels=t.levels, ids=t.ids, names=t.names, task_ids=t.task_ids)
    return tasks[: t.limit] if t.limit else tasks


def read_records(path: Path, model: type[M]) -> list[M]:
    """The rows of a JSONL file; a last line cut short by a crash is removed from the file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    rows: list[M] = []
    good_end = pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith(b"\n"):
            break
        if line.strip():
            rows.append(model.model_validate_json(line))
        good_end = pos
    if good_end != len(data):
        log.warning("%s: dropping %d bytes of an unfinished last row", path, len(data) - good_end)
        with path.open("r+b") as f:
            f.truncate(good_end)
    return rows


class JsonlSink:
    """Appends one record per line, flushed and fsynced before ``write`` returns."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a")

    def write(self, record: BaseModel) -> None:
        self._file.write(record.model_dump_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


class RunState(BaseModel):
    """What is already in a run directory."""

    done: list[str]
    turns: dict[str, list[Turn]]

    @classmethod
    def read(cls, out_dir: Path) -> RunState:
        results = read_records(out_dir / RESULTS, TaskResult)
        turns: dict[str, list[Turn]] = {}
        for turn in read_records(out_dir / TURNS, Turn):
            turns.setdefault(turn.task_id, []).append(turn)
        return cls(done=[r.task_id for r in results], turns=turns)


def write_config(config: RolloutConfig, source: Path | None, out_dir: Path) -> None:
    path = out_dir / CONFIG
    resolved = {"run_definition": str(source) if source else None, "rollout": config.model_dump(mode="json")}
    resolved["sandbox_resolved"] = config.sandbox_config().model_dump(mode="json")
    if path.exists():
        before = json.loads(path.read_text()).get("rollout")
        if before != resolved["rollout"]:
            log.warning("%s: the run definition changed since this directory was started; resuming anyway", path)
    path.write_text(json.dumps(resolved, indent=2))


Event = Callable[[str, Any], None]


async def run_rollout(
    config: RolloutConfig,
    tasks: list[Task],
    out_dir: Path,
    *,
    source: Path | None = None,
    on_event: Event | None = None,
) -> dict[str, Any]:
    """Run every task of ``tasks`` without a result in ``out_dir``; returns the summary (also written).

    ``on_event(kind, record)`` is called with ``("turn", Turn)`` and ``("result", TaskResult)`` as they are
    written, and ``("unfinished", task_id)`` for a task that ended without a result."""
    from rubric_rl.sandbox.executors import make_executor

    out_dir.mkdir(parents=True, exist_ok=True)
    write_config(config, source, out_dir)
    state = RunState.read(out_dir)
    todo = [t for t in tasks if t.id not in set(state.done)]
    started = time.monotonic()
    emit = on_event or (lambda kind, record: None)
    clients = [ChatClient(config.coder.endpoint)]
    if config.planner is not None:
        clients.append(ChatClient(config.planner.endpoint))
    turns_sink, results_sink = JsonlSink(out_dir / TURNS), JsonlSink(out_dir / RESULTS)
    unfinished: list[str] = []
    try:
        async with make_executor(config.sandbox_config(), config.executor) as executor:
            roles = Roles(
                config=config,
                planner=Planner(config.planner, config.device, clients[1]) if config.planner else None,
                coder=Coder(config.coder, config.device, clients[0]),
                verifier=Verifier(config.verifier),
                gateway=SandboxGateway(executor),
            )
            gate = asyncio.Semaphore(config.concurrency)

            def record(turn: Turn) -> None:
                turns_sink.write(turn)
                emit("turn", turn)

            async def one(task: Task) -> None:
                async with gate:
                    result = await run_task(task, state.turns.get(task.id, []), roles, record)
                if result is None:
                    unfinished.append(task.id)
                    emit("unfinished", task.id)
                else:
                    results_sink.write(result)
                    emit("result", result)

            await asyncio.gather(*(one(t) for t in todo))
    finally:
        turns_sink.close()
        results_sink.close()
        for client in clients:
            await client.aclose()
    summary = summarize(out_dir, tasks, elapsed_s=time.monotonic() - started, unfinished=unfinished)
    (out_dir / SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary


def summarize(out_dir: Path, tasks: list[Task], *, elapsed_s: float, unfinished: list[str]) -> dict[str, Any]:
    """Counts of the run directory (``rubric-rl report`` computes the metrics)."""
    results = read_records(out_dir / RESULTS, TaskResult)
    turns = read_records(out_dir / TURNS, Turn)
    return {
        "tasks": len(tasks),
        "finished": len(results),
        "unfinished": sorted(unfinished),
        "status": dict(sorted(Counter(r.status for r in results).items())),
        "correct": sum(r.status == "correct" for r in results),
        "turns": len(turns),
        "coder_turns": sum(t.role == "coder" for t in turns),
        "tokens": sum(t.tokens for t in turns),
        "elapsed_s": round(elapsed_s, 3),
    }
