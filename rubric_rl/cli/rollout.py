"""``rubric-rl rollout``: the Planner / Coder / Verifier loop over a task set, resumable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_rl.cli.common import JsonFlag, console, fail

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a field of the run definition: dotted.key=value (YAML value); repeatable."),
]


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise fail(f"--set {pair!r}: expected dotted.key=value")
        out[key.strip()] = yaml.safe_load(value)
    return out


def rollout(
    definition: Annotated[Path, typer.Argument(help="Run definition YAML, e.g. rollouts/level3.yaml.")],
    out: Annotated[Path, typer.Option(help="Run directory: turns.jsonl, results.jsonl, config.json, summary.json.")],
    overrides: SetOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check the definition and list the work; start nothing.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the loop over the definition's tasks; every turn is appended as it ends, and a rerun resumes."""
    from rubric_rl.agents.pcv.config import RolloutConfigError, load_rollout
    from rubric_rl.agents.pcv.run import RunState, select_tasks
    from rubric_rl.tasks import TaskError

    try:
        config = load_rollout(definition, parse_overrides(overrides))
        tasks = select_tasks(config)
    except (RolloutConfigError, TaskError, ValueError) as e:
        raise fail(str(e)) from None
    if not tasks:
        raise fail(f"{definition}: the task filter keeps no task of {config.tasks.source}")
    state = RunState.read(out) if out.exists() else RunState(done=[], turns={})
    if dry_run:
        _print_plan(config, tasks, state, out, as_json)
        return
    from rubric_rl.sandbox.run.proctree import end_with_descendants_on_signal

    end_with_descendants_on_signal()
    import asyncio

    summary = asyncio.run(_run(config, tasks, out, definition, quiet=as_json))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        c = console()
        c.print(
            f"[bold]{config.name}[/]: {summary['finished']}/{summary['tasks']} tasks finished, "
            f"{summary['correct']} correct; {summary['coder_turns']} coder turns, {summary['tokens']} tokens"
        )
        if summary["unfinished"]:
            c.print(f"[yellow]unfinished (rerun to resume): {', '.join(summary['unfinished'])}[/]")
        c.print(f"records in {out}; report: rubric-rl report {out} --out {out / 'report'}")


def _print_plan(config, tasks, state, out: Path, as_json: bool) -> None:
    done = set(state.done)
    plan = {
        "run": config.name,
        "device": config.device,
        "track": config.track,
        "tasks": len(tasks),
        "already_finished": sum(t.id in done for t in tasks),
        "to_resume": sorted(t.id for t in tasks if t.id not in done and t.id in state.turns),
        "task_ids": [t.id for t in tasks],
        "planner": None
        if config.planner is None
        else f"{config.planner.endpoint.model} @ {config.planner.endpoint.base_url}",
        "coder": f"{config.coder.endpoint.model} @ {config.coder.endpoint.base_url}",
        "budgets": config.budgets.model_dump(),
        "concurrency": config.concurrency,
        "docs_dir": str(config.verifier.docs_dir) if config.verifier.docs_dir else None,
        "out": str(out),
    }
    if as_json:
        typer.echo(json.dumps(plan, indent=2))
        return
    c = console()
    c.print(f"[bold]dry run[/] of {config.name}: nothing is started")
    for key, value in plan.items():
        if key != "task_ids":
            c.print(f"  {key}: {value}")
    c.print(f"  task ids: {', '.join(plan['task_ids'][:20])}{' ...' if len(tasks) > 20 else ''}")


async def _run(config, tasks, out: Path, definition: Path, *, quiet: bool) -> dict[str, Any]:
    import logging
    import sys
    import time

    from rubric_rl.agents.pcv.run import run_rollout

    if sys.stderr.isatty() and not quiet:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn(f"[bold]{config.name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
        )
        with progress:
            bar = progress.add_task("", total=len(tasks))

            def on_event(kind: str, record: Any) -> None:
                if kind == "turn":
                    status = record.verdict.status if record.verdict is not None else (record.kind)
                    progress.update(bar, description=f"{record.task_id} turn {record.index}: {status}")
                else:
                    progress.update(bar, advance=1)

            return await run_rollout(config, tasks, out, source=definition, on_event=on_event)
    log = logging.getLogger("rubric_rl.rollout")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    seen = {"done": 0, "t": 0.0}

    def on_event_log(kind: str, record: Any) -> None:
        if kind == "turn":
            if time.monotonic() - seen["t"] > 10:
                seen["t"] = time.monotonic()
                status = record.verdict.status if record.verdict is not None else record.kind
                log.info("%s turn %d (%s): %s", record.task_id, record.index, record.role, status)
            return
        seen["done"] += 1
        what = record.status if kind == "result" else "unfinished"
        log.info("%d/%d tasks ended (last: %s %s)", seen["done"], len(tasks), getattr(record, "task_id", record), what)

    return await run_rollout(config, tasks, out, source=definition, on_event=on_event_log)
