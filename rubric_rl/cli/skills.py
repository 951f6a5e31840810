"""``rubric-rl skills``: the skill cards, their prompts, and response parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rubric_rl.cli.common import JsonFlag, fail, read_text

skills_app = typer.Typer(no_args_is_help=True, help="Skill cards (generate, refine): list, render prompts, parse.")


@skills_app.command("list")
def skills_list(as_json: JsonFlag = False) -> None:
    """The bundled skill cards."""
    from rubric_rl.skills import bundled_skills, load_skill

    cards = [load_skill(p) for p in bundled_skills()]
    if as_json:
        for c in cards:
            typer.echo(
                json.dumps({"name": c.name, "version": c.version, "description": c.description, "inputs": c.inputs})
            )
        return
    for c in cards:
        typer.echo(f"{c.name} (v{c.version}): {c.description}  [inputs: {', '.join(c.inputs)}]")


@skills_app.command("render")
def skills_render(
    skill: Annotated[str, typer.Option(help="Skill card: a bundled name (generate, refine) or a path.")],
    reference: Annotated[Path, typer.Option(help="Reference program (.py).")],
    backend: Annotated[str, typer.Option(help="cuda or cpu.")] = "cuda",
    candidate: Annotated[Path | None, typer.Option(help="Current program (refine).")] = None,
    feedback: Annotated[Path | None, typer.Option(help="Feedback text (refine).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the chat messages a skill card makes for one reference program."""
    from rubric_rl.skills import SkillCardError, load_skill

    try:
        card = load_skill(skill)
        messages = card.render(
            reference=read_text(reference, "reference"),
            backend=backend,  # type: ignore[arg-type]
            candidate=read_text(candidate, "candidate") if candidate else None,
            feedback=read_text(feedback, "feedback") if feedback else None,
        )
    except (SkillCardError, FileNotFoundError, ValueError, KeyError) as e:
        raise fail(str(e)) from None
    if as_json:
        typer.echo(json.dumps(messages, indent=2))
        return
    for m in messages:
        typer.secho(f"--- {m['role']} ---", bold=True)
        typer.echo(m["content"])


@skills_app.command("extract")
def skills_extract(
    response: Annotated[Path, typer.Argument(help="A coder's response (text or Markdown).")],
    as_json: JsonFlag = False,
) -> None:
    """Extract the candidate program from a coder's response, or say precisely why it cannot be."""
    from rubric_rl.skills import extract_program

    result = extract_program(read_text(response, "response"))
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    elif result.ok:
        typer.echo(result.program, nl=False)
        for note in result.notes:
            typer.secho(f"note: {note}", err=True, fg=typer.colors.YELLOW)
    else:
        typer.secho(f"no program ({result.error_code}): {result.error}", err=True, fg=typer.colors.RED)
    if not result.ok:
        raise typer.Exit(code=1)


# ---- datasets ----------------------------------------------------------------------------------------------------
def _load_sources(sources: list[str]):
    """Tasks of every source, ids unique across them."""
    from rubric_rl.tasks import TaskError, load_tasks

    tasks: dict = {}
    for source in sources:
        try:
            loaded = load_tasks(source)
        except TaskError as e:
            raise fail(str(e)) from None
        for t in loaded:
            if t.id in tasks:
                raise fail(f"task id {t.id} is in {tasks[t.id].origin} and in {source}: give sources with distinct ids")
            tasks[t.id] = t
    return tasks


def _bootstrap(tasks: dict, candidates: Path | None, backend: str, sandbox_file: Path | None, out: Path):
    import asyncio

    from rubric_rl.cli.verify import sandbox_config
    from rubric_rl.resources import content_dir
    from rubric_rl.sandbox.executors import ExecutorConfig, make_executor
    from rubric_rl.skills.bootstrap import CandidateInputError, bootstrap_evaluations, read_candidates

    path = candidates or content_dir("examples") / "candidates.jsonl"
    try:
        rows = read_candidates(path)
    except CandidateInputError as e:
        raise fail(str(e)) from None
    cfg = sandbox_config(backend, sandbox_file, {})

    async def run():
        async with make_executor(cfg, ExecutorConfig(kind="local")) as ex:
            return await bootstrap_evaluations(
                tasks, rows, ex, out / "bootstrap_verdicts.jsonl", on_done=lambda c, s: log.info("%s: %s", c, s)
            )

    import logging

    log = logging.getLogger("rubric_rl.skills.build")
    try:
        evaluated, counts = asyncio.run(run())
    except CandidateInputError as e:
        raise fail(str(e)) from None
    return evaluated, {"kind": "bootstrap", "candidates": str(path), "verdicts": str(out / "bootstrap_verdicts.jsonl"),
                       **counts}  # fmt: skip


@skills_app.command("build")
def skills_build(
    tasks: Annotated[list[str], typer.Option(help="Task source (repeatable): KernelBench dir, .jsonl, hf:<dataset>.")],
    out: Annotated[Path, typer.Option(help="Output directory: train.parquet, val.parquet, dataset.json.")],
    skill: Annotated[list[str], typer.Option(help="Skill card (repeatable): generate, refine, or a path.")] = [  # noqa: B006
        "generate"
    ],
    from_ledger: Annotated[Path | None, typer.Option(help="Refine rows from a reward ledger (file or run dir)")] = None,
    from_verdicts: Annotated[
        Path | None, typer.Option(help="Refine rows from a JSONL of {task_id, program, verdict}.")
    ] = None,
    bootstrap: Annotated[
        bool, typer.Option("--bootstrap", help="Evaluate --candidates first; refine from their Verdicts.")
    ] = False,
    candidates: Annotated[
        Path | None, typer.Option(help="Candidates JSONL for --bootstrap (default: the bundled examples).")
    ] = None,
    backend: Annotated[str, typer.Option(help="cuda or cpu: the cards' instructions and the bootstrap sandbox.")] = (
        "cuda"
    ),
    sandbox_file: Annotated[
        Path | None, typer.Option("--sandbox-config", help="YAML of SandboxConfig fields (bootstrap).")
    ] = None,
    tokenizer: Annotated[str | None, typer.Option(help="Tokenizer (model name or path) measuring prompts.")] = None,
    max_prompt_length: Annotated[int | None, typer.Option(help="Drop (and count) longer prompts, tokens.")] = None,
    val_fraction: Annotated[float, typer.Option(help="Share of tasks held out for val.parquet.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Seed of the task split.")] = 0,
    allow_eval_tasks: Annotated[
        bool, typer.Option("--allow-eval-tasks", help="Keep KernelBench evaluation problems (levelled tasks).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Build a verl RL dataset of atomic-skill prompts (generate, refine), split by task."""
    from pydantic import ValidationError

    from rubric_rl.skills.dataset import DatasetConfig, build_dataset
    from rubric_rl.skills.ledger import LedgerError, evaluated_from_ledger, read_ledger, read_verdicts_file
    from rubric_rl.skills.tokens import TokenizerError

    if sum(x is not None and x is not False for x in (from_ledger, from_verdicts, bootstrap)) > 1:
        raise fail("give at most one of --from-ledger, --from-verdicts and --bootstrap")
    try:
        cfg = DatasetConfig(
            skills=skill, backend=backend, tokenizer=tokenizer, max_prompt_length=max_prompt_length,  # type: ignore[arg-type]
            val_fraction=val_fraction, seed=seed, allow_eval_tasks=allow_eval_tasks,
        )  # fmt: skip
    except ValidationError as e:
        err = e.errors()[0]
        raise fail(f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']}") from None
    task_map = _load_sources(tasks)
    sources: dict = {"tasks": tasks}
    evaluated = None
    try:
        if from_ledger is not None:
            evaluated = evaluated_from_ledger(read_ledger(from_ledger))
            sources["evaluations"] = {"kind": "ledger", "path": str(from_ledger)}
        elif from_verdicts is not None:
            evaluated = read_verdicts_file(from_verdicts)
            sources["evaluations"] = {"kind": "verdicts", "path": str(from_verdicts)}
        elif bootstrap:
            evaluated, sources["evaluations"] = _bootstrap(task_map, candidates, backend, sandbox_file, out)
        manifest = build_dataset(list(task_map.values()), cfg, out, evaluated=evaluated, sources=sources)
    except (LedgerError, TokenizerError, ValueError, FileNotFoundError) as e:
        raise fail(str(e)) from None
    if as_json:
        typer.echo(json.dumps(manifest, indent=2))
        return
    rows = {k: v["rows"] for k, v in manifest["files"].items()}
    typer.echo(f"{out}: train {rows['train']} rows ({len(manifest['tasks']['train'])} tasks), "
               f"val {rows['val']} rows ({len(manifest['tasks']['val'])} tasks)")  # fmt: skip
    typer.echo(f"per skill: {manifest['counts']['by_skill']}")
    dropped = {k: v for k, v in manifest["dropped"].items() if v}
    if dropped:
        typer.echo(f"dropped: {dropped}")
    if manifest["excluded_eval_tasks"]:
        typer.echo(f"excluded {len(manifest['excluded_eval_tasks'])} KernelBench evaluation task(s)")


@skills_app.command("sft")
def skills_sft(
    from_ledger: Annotated[Path, typer.Option(help="Reward ledger: ledger.jsonl or a run directory holding one.")],
    out: Annotated[Path, typer.Option(help="Output parquet (messages); a manifest <stem>.json is written beside.")],
    tasks: Annotated[
        list[str] | None, typer.Option(help="Task sources for the reference (default: read from each prompt).")
    ] = None,
    min_score: Annotated[float, typer.Option(help="Keep rows with a reward strictly above this.")] = 0.0,
    require_correct: Annotated[bool, typer.Option(help="Keep only rows whose Verdict is 'correct'.")] = True,
    max_per_prompt: Annotated[int | None, typer.Option(help="Rows kept per prompt, best reward first.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Export a reward ledger's good samples as SFT conversations (rejection fine-tuning)."""
    from rubric_rl.skills.ledger import LedgerError, read_ledger
    from rubric_rl.skills.sft import SftConfig, export_sft

    try:
        rows = read_ledger(from_ledger)
    except LedgerError as e:
        raise fail(str(e)) from None
    references = {t.id: t.code for t in _load_sources(tasks).values()} if tasks else None
    cfg = SftConfig(min_score=min_score, require_correct=require_correct, max_per_prompt=max_per_prompt)
    manifest = export_sft(rows, cfg, out, references=references, sources={"ledger": str(from_ledger), "tasks": tasks})
    if as_json:
        typer.echo(json.dumps(manifest, indent=2))
        return
    typer.echo(f"{out}: {manifest['rows']} conversations from {manifest['ledger_rows']} ledger rows")
    if manifest["dropped"]:
        typer.echo(f"dropped: {manifest['dropped']}")
