"""``rubric-rl tasks``: list and inspect task sources."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from rubric_rl.cli.common import JsonFlag, console, fail

tasks_app = typer.Typer(no_args_is_help=True, help="List and inspect task sources (KernelBench, JSONL, HF datasets).")


def load_task_source(source: str, levels: list[int] | None, ids: str | None, names: list[str] | None):
    from rubric_rl.tasks import TaskError, filter_tasks, load_tasks

    try:
        tasks = load_tasks(source)
        return filter_tasks(tasks, levels=levels, ids=ids, names=names)
    except (TaskError, ValueError) as e:
        raise fail(str(e)) from None


# ---- tasks ---------------------------------------------------------------------------------------------------
@tasks_app.command("list")
def tasks_list(
    source: Annotated[str, typer.Option(help="KernelBench checkout, problems .jsonl, or hf:<dataset>.")],
    level: Annotated[list[int] | None, typer.Option(help="Keep these levels (repeatable).")] = None,
    ids: Annotated[str | None, typer.Option(help="Problem-id ranges, e.g. '1-10,15'.")] = None,
    name: Annotated[list[str] | None, typer.Option(help="Name glob or substring (repeatable).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the tasks of a source, filtered."""
    tasks = load_task_source(source, level, ids, name)
    if as_json:
        for t in tasks:
            typer.echo(json.dumps(t.model_dump(exclude={"code"})))
        return
    from rubric_rl.reporting import tasks_table

    out = console()
    out.print(tasks_table(tasks))
    out.print(f"{len(tasks)} task(s)")


@tasks_app.command("show")
def tasks_show(
    task_id: Annotated[str, typer.Argument(help="Task id, e.g. L3-1.")],
    source: Annotated[str, typer.Option(help="KernelBench checkout, problems .jsonl, or hf:<dataset>.")],
    as_json: JsonFlag = False,
) -> None:
    """Print one task's reference program."""
    tasks = [t for t in load_task_source(source, None, None, None) if t.id == task_id]
    if not tasks:
        raise fail(f"no task {task_id} in {source}")
    typer.echo(tasks[0].model_dump_json(indent=2) if as_json else tasks[0].code)
