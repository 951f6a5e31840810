"""``rubric-rl tasks``: list and inspect task sources; synthesise tasks (``synth``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rubric_rl.cli.common import JsonFlag, console, fail

tasks_app = typer.Typer(
    no_args_is_help=True, help="List and inspect task sources (KernelBench, JSONL, HF datasets); synthesise tasks."
)


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


# ---- synthesis -----------------------------------------------------------------------------------------------
def _synth_config(overrides: dict, config_file, llm: dict):
    import yaml
    from pydantic import ValidationError

    from rubric_rl.tasks.synth import SynthConfig

    data: dict = {}
    if config_file is not None:
        try:
            data = yaml.safe_load(config_file.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise fail(f"{config_file}: {e}") from None
    for key, value in overrides.items():
        if value is None:
            continue
        if "." in key:
            outer, inner = key.split(".", 1)
            data.setdefault(outer, {})[inner] = value
        else:
            data[key] = value
    if any(v is not None for v in llm.values()):
        data["llm"] = {**data.get("llm", {}), **{k: v for k, v in llm.items() if v is not None}}
    try:
        return SynthConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise fail(f"config field {'.'.join(str(x) for x in err['loc']) or '(top level)'}: {err['msg']}") from None


def _against_index(sources: list[str]):
    from rubric_rl.tasks import TaskError, load_tasks
    from rubric_rl.tasks.similarity import SimilarityIndex

    programs = []
    for source in sources:
        try:
            programs += [(t.id, t.name, t.code) for t in load_tasks(source)]
        except TaskError as e:
            raise fail(str(e)) from None
    return SimilarityIndex(programs)


def _synth_progress(total: int, quiet: bool):
    """(callback, context manager): a rich bar on a terminal, a log line every 10 s elsewhere."""
    import contextlib
    import logging
    import sys
    import time

    if sys.stderr.isatty() and not quiet:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("[bold]synthesising"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.description}"))  # fmt: skip
        bar = progress.add_task("", total=total)
        seen = {"n": 0, "kept": 0}

        def on_row(row):
            seen["n"] += 1
            seen["kept"] += row["accepted"]
            progress.update(bar, completed=seen["kept"], description=f"{seen['n']} candidates")

        return on_row, progress
    log = logging.getLogger("rubric_rl.tasks.synth")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    state = {"n": 0, "kept": 0, "t": time.monotonic()}

    def on_row_log(row):
        state["n"] += 1
        state["kept"] += row["accepted"]
        if time.monotonic() - state["t"] > 10:
            state["t"] = time.monotonic()
            log.info("%d candidates, %d accepted (last: %s)", state["n"], state["kept"], row["rejected_by"] or "kept")

    return on_row_log, contextlib.nullcontext()


@tasks_app.command("synth")
def tasks_synth(
    n: Annotated[int, typer.Option("--n", help="Tasks to accept.")],
    out: Annotated[Path, typer.Option(help="Task set (JSONL); .funnel.jsonl, .summary.json, .config.json beside.")],
    device: Annotated[str, typer.Option(help="cpu or cuda: where the filters run, and the size profile.")] = "cpu",
    composer: Annotated[str, typer.Option(help="programmatic or llm.")] = "programmatic",
    seed: Annotated[int, typer.Option(help="Seed of every draw.")] = 0,
    max_candidates: Annotated[int | None, typer.Option(help="Candidate budget (default 20 x n).")] = None,
    kernelbench: Annotated[
        list[str] | None, typer.Option(help="Task source to decontaminate against (repeatable).")
    ] = None,
    no_decontaminate: Annotated[
        bool, typer.Option("--no-decontaminate", help="Run without decontamination (recorded as skipped).")
    ] = False,
    compile_filter: Annotated[
        bool | None, typer.Option("--compile/--no-compile", help="Run the torch.compile filter (slow on CPU).")
    ] = None,
    runtime_window: Annotated[str | None, typer.Option(help="Eager window 'LO,HI' in ms (cuda 1,100; cpu 0.1,20).")] = (
        None
    ),
    workers: Annotated[int | None, typer.Option(help="Candidates probed at once.")] = None,
    min_ops: Annotated[int | None, typer.Option(help="Fewest operators fused (2).")] = None,
    max_ops: Annotated[int | None, typer.Option(help="Most operators fused (5).")] = None,
    seed_table: Annotated[Path | None, typer.Option(help="Seed-operator table (default: the bundled one).")] = None,
    id_offset: Annotated[int | None, typer.Option(help="problem_id = offset + candidate index.")] = None,
    llm_base_url: Annotated[str | None, typer.Option(help="LLM composer endpoint (OpenAI-compatible).")] = None,
    llm_model: Annotated[str | None, typer.Option(help="LLM composer model.")] = None,
    llm_prompt: Annotated[Path | None, typer.Option(help="LLM composer prompt file.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML of SynthConfig fields (flags override it).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Synthesise tasks (CUDA Agent's pipeline): compose seed operators, filter, append; reruns resume."""
    if not kernelbench and not no_decontaminate:
        raise fail("give --kernelbench SOURCE (the problems to keep out of training) or --no-decontaminate")
    window = None
    if runtime_window is not None:
        try:
            window = [float(x) for x in runtime_window.split(",")]
            assert len(window) == 2
        except (ValueError, AssertionError):
            raise fail(f"--runtime-window {runtime_window!r}: expected 'LO,HI' in ms") from None
    overrides = {
        "n": n, "device": device, "composer": composer, "seed": seed, "max_candidates": max_candidates,
        "workers": workers, "min_ops": min_ops, "max_ops": max_ops, "seed_table": seed_table, "id_offset": id_offset,
        "probe.compile": compile_filter, "probe.runtime_ms": window,
        "decontamination.against": kernelbench or None,
    }  # fmt: skip
    cfg = _synth_config(overrides, config, {"base_url": llm_base_url, "model": llm_model, "prompt": llm_prompt})
    from rubric_rl.tasks.synth import SeedTableError, Synthesizer

    index = _against_index(cfg.decontamination.against) if cfg.decontamination.against else None
    try:
        synth = Synthesizer(cfg, out, against=index)
    except (SeedTableError, OSError) as e:
        raise fail(str(e)) from None
    on_row, context = _synth_progress(cfg.n, as_json)
    try:
        with context:
            summary = synth.run(on_candidate=on_row)
    except ValueError as e:
        raise fail(str(e)) from None
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{out}: {summary['accepted']} of {summary['candidates']} candidates accepted")
    for col in ("stage", "entered", "removed"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for s in summary["funnel"]:
        table.add_row(s["stage"], str(s["entered"]), str(s["removed"]))
    console().print(table)
    run = summary["this_run"]
    console().print(f"this run: {run['candidates']} candidates, {run['accepted']} accepted in {run['elapsed_s']} s "
                    f"({run['tasks_per_minute']} tasks/min)")  # fmt: skip
