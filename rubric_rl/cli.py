"""The ``rubric-rl`` command. Each subcommand is thin: it parses flags, builds typed configs, calls the library,
and prints (a rich table, or JSON with ``--json``). Heavy imports happen inside commands so ``--help`` is fast.

Exit codes: 0 when the command did its job (a Verdict was reached, whatever it says); 2 for bad usage or
unreadable inputs, with a message naming what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__.split("\n\n")[0])
tasks_app = typer.Typer(no_args_is_help=True, help="List and inspect task sources (KernelBench, JSONL, HF datasets).")
skills_app = typer.Typer(no_args_is_help=True, help="Skill cards (generate, refine): list, render prompts, parse.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(skills_app, name="skills")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code=2)


def _console():  # deferred: rich is quick, but keep --help free of it
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 140)  # off a terminal rich would wrap at 80


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise fail(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"cannot read {what} {path}: {e}") from None


def _load_tasks(source: str, levels: list[int] | None, ids: str | None, names: list[str] | None):
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
    tasks = _load_tasks(source, level, ids, name)
    if as_json:
        for t in tasks:
            typer.echo(json.dumps(t.model_dump(exclude={"code"})))
        return
    from rubric_rl.reporting import tasks_table

    console = _console()
    console.print(tasks_table(tasks))
    console.print(f"{len(tasks)} task(s)")


@tasks_app.command("show")
def tasks_show(
    task_id: Annotated[str, typer.Argument(help="Task id, e.g. L3-1.")],
    source: Annotated[str, typer.Option(help="KernelBench checkout, problems .jsonl, or hf:<dataset>.")],
    as_json: JsonFlag = False,
) -> None:
    """Print one task's reference program."""
    tasks = [t for t in _load_tasks(source, None, None, None) if t.id == task_id]
    if not tasks:
        raise fail(f"no task {task_id} in {source}")
    typer.echo(tasks[0].model_dump_json(indent=2) if as_json else tasks[0].code)


# ---- skills --------------------------------------------------------------------------------------------------
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
            reference=_read_text(reference, "reference"),
            backend=backend,  # type: ignore[arg-type]
            candidate=_read_text(candidate, "candidate") if candidate else None,
            feedback=_read_text(feedback, "feedback") if feedback else None,
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

    result = extract_program(_read_text(response, "response"))
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


# ---- verify --------------------------------------------------------------------------------------------------
def sandbox_config(
    device: str | None,
    config_file: Path | None,
    overrides: dict[str, Any],
):
    """SandboxConfig from a YAML file (optional), then CLI overrides; errors name the field."""
    import yaml
    from pydantic import ValidationError

    from rubric_rl.sandbox import SandboxConfig

    data: dict[str, Any] = {}
    if config_file is not None:
        try:
            data = yaml.safe_load(_read_text(config_file, "config")) or {}
        except yaml.YAMLError as e:
            raise fail(f"{config_file}: not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise fail(f"{config_file}: expected a mapping of SandboxConfig fields")
    if device is None and "backend" not in data:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device is not None:
        data["backend"] = device
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SandboxConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise fail(f"config field {'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None


DeviceOpt = Annotated[str | None, typer.Option("--device", help="cuda or cpu (default: cuda if available).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="YAML file of SandboxConfig fields.")]


@app.command()
def verify(
    reference: Annotated[Path, typer.Argument(help="Reference program: Model, get_inputs, get_init_inputs.")],
    candidate: Annotated[Path, typer.Argument(help="Candidate program: ModelNew with load_inline kernels.")],
    device: DeviceOpt = None,
    trials: Annotated[int | None, typer.Option(help="Correctness trials on fresh inputs (default 5).")] = None,
    perf_trials: Annotated[int | None, typer.Option(help="Timed calls per model (default 100).")] = None,
    timing: Annotated[bool, typer.Option(help="Measure speed against eager (and compile).")] = True,
    compile_baseline: Annotated[bool, typer.Option("--compile/--no-compile", help="Time torch.compile too.")] = True,
    compile_mode: Annotated[str | None, typer.Option(help="torch.compile mode of the baseline.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Build cache directory.")] = None,
    config: ConfigOpt = None,
    out: Annotated[Path | None, typer.Option(help="Also write the Verdict JSON here.")] = None,
    compile_only: Annotated[
        bool, typer.Option("--compile-only", help="Static checks and a compile of the sources only (no GPU needed).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Evaluate one candidate against its reference and print the Verdict."""
    ref_text = _read_text(reference, "reference")
    cand_text = _read_text(candidate, "candidate")
    from rubric_rl.tasks import TaskError, check_reference_source

    try:
        check_reference_source(ref_text, str(reference))
    except TaskError as e:
        raise fail(str(e)) from None
    cfg = sandbox_config(
        device,
        config,
        {
            "correctness_trials": trials,
            "perf_trials": perf_trials,
            "measure_performance": timing,
            "compile_baseline": compile_baseline,
            "compile_mode": compile_mode,
            "cache_dir": cache_dir,
        },
    )
    from rubric_rl.sandbox import Evaluator

    if compile_only:
        report = Evaluator(cfg).check_compiles(cand_text, arch=cfg.arch or "9.0")
        typer.echo(report.model_dump_json(indent=2) if as_json else _compile_report_text(report))
        return
    verdict = Evaluator(cfg).evaluate(ref_text, cand_text, task_id=reference.stem)
    text = verdict.model_dump_json(indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    if as_json:
        typer.echo(text)
    else:
        from rubric_rl.reporting import verdict_panel

        _console().print(verdict_panel(verdict, title=f"{reference.name} <- {candidate.name}"))


@app.command()
def judge(
    reference: Annotated[Path, typer.Argument(help="Reference program: Model, get_inputs, get_init_inputs.")],
    candidate: Annotated[Path, typer.Argument(help="Candidate program to judge (ModelNew).")],
    rubric: Annotated[
        str | None, typer.Option(help="Rubric file or bundled name, e.g. judges/stitchcuda.yaml (the default).")
    ] = None,
    skill: Annotated[str, typer.Option(help="Skill the candidate answered: generate, refine, or a card path.")] = (
        "generate"
    ),
    feedback: Annotated[Path | None, typer.Option(help="Feedback the candidate answers (refine).")] = None,
    previous: Annotated[Path | None, typer.Option(help="The program that was refined (refine).")] = None,
    verdict: Annotated[Path | None, typer.Option(help="The candidate's Verdict JSON (rubric-rl verify --out).")] = None,
    backend: Annotated[str | None, typer.Option(help="cuda or cpu (default: the Verdict's, else cuda).")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint (default: $RUBRIC_RL_JUDGE_BASE_URL).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Judge model name (default: $RUBRIC_RL_JUDGE_MODEL).")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Use the offline heuristic judge, not an LLM.")] = False,
    samples: Annotated[int | None, typer.Option(help="Judge samples to average (default 1).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Judge sampling temperature (default 0).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML file of JudgeConfig fields.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither reuse nor store cached judgments.")] = False,
    out: Annotated[Path | None, typer.Option(help="Also write the Judgment JSON here.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Score one candidate against a rubric (LLM judge, or the offline heuristic when no endpoint is set)."""
    import asyncio

    import yaml
    from pydantic import ValidationError

    from rubric_rl.judge import JudgeConfig, RubricError, build_request, make_judge
    from rubric_rl.sandbox.verdict import Verdict
    from rubric_rl.skills import SkillCardError

    def field_error(e: ValidationError) -> str:
        err = e.errors()[0]
        return f"field {'.'.join(str(x) for x in err['loc']) or '(top level)'}: {err['msg']}"

    if offline and base_url is not None:
        raise fail("--offline and --base-url exclude each other")
    if backend not in (None, "cuda", "cpu"):
        raise fail(f"--backend must be cuda or cpu, not {backend!r}")
    ref_text, cand_text = _read_text(reference, "reference"), _read_text(candidate, "candidate")
    feedback_text = _read_text(feedback, "feedback") if feedback else None
    previous_text = _read_text(previous, "previous program") if previous else None
    verdict_obj = None
    if verdict is not None:
        try:
            verdict_obj = Verdict.model_validate_json(_read_text(verdict, "verdict"))
        except ValidationError as e:
            raise fail(f"{verdict}: not a Verdict: {field_error(e)}") from None
    data: dict[str, Any] = {}
    if config is not None:
        try:
            data = yaml.safe_load(_read_text(config, "config")) or {}
        except yaml.YAMLError as e:
            raise fail(f"{config}: not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise fail(f"{config}: expected a mapping of JudgeConfig fields")
    overrides = {
        "rubric": rubric,
        "base_url": base_url,
        "model": model,
        "samples": samples,
        "temperature": temperature,
        "offline": offline or None,
        "cache": False if no_cache else None,
    }
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        cfg = JudgeConfig.model_validate(data).resolved()
        request = build_request(
            skill,
            ref_text,
            cand_text,
            feedback=feedback_text,
            previous=previous_text,
            verdict=verdict_obj,
            backend=backend,  # type: ignore[arg-type]
            task_id=reference.stem,
        )
        judge_ = make_judge(cfg)
        judge_.rubric.check_skill(request.skill)
    except ValidationError as e:
        raise fail(f"{e.title} {field_error(e)}") from None
    except (RubricError, SkillCardError, FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from None

    async def run():
        try:
            return await judge_.judge(request)
        finally:
            await judge_.aclose()

    judgment = asyncio.run(run())
    text = judgment.model_dump_json(indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    if as_json:
        typer.echo(text)
    else:
        from rubric_rl.judge.report import judgment_panel

        _console().print(judgment_panel(judgment, title=f"{reference.name} <- {candidate.name}"))
    if judgment.judge_failed:
        typer.secho(
            f"warning: the judge failed ({judgment.failure}); neutral fallback scores", err=True, fg=typer.colors.YELLOW
        )


@app.command("verify-batch")
def verify_batch(
    tasks: Annotated[str, typer.Option(help="Task source: KernelBench checkout, problems .jsonl, or hf:<dataset>.")],
    candidates: Annotated[Path, typer.Option(help="JSONL of {candidate_id, task_id, code | response}.")],
    out: Annotated[Path, typer.Option(help="Run directory: verdicts.jsonl, summary.json, config.json.")],
    executor: Annotated[str, typer.Option(help="local or ray.")] = "local",
    device: DeviceOpt = None,
    judge: Annotated[str, typer.Option(help="none, offline (heuristic), or a judge config YAML.")] = "none",
    rubric: Annotated[str, typer.Option(help="Rubric for --judge (bundled name or path).")] = "stitchcuda",
    build_workers: Annotated[
        int | None, typer.Option(help="Concurrent builds (default: one per 2 cores on cuda, one per core on cpu).")
    ] = None,
    perf_trials: Annotated[int | None, typer.Option(help="Timed calls per model (default 100).")] = None,
    compile_baseline: Annotated[bool, typer.Option("--compile/--no-compile", help="Time torch.compile too.")] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Build cache directory.")] = None,
    config: ConfigOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Evaluate a file of candidates; each Verdict is appended as it arrives, and a rerun resumes."""
    import asyncio

    from rubric_rl.sandbox.batch import BatchInputError, read_candidates
    from rubric_rl.sandbox.executors import ExecutorConfig

    try:
        rows = read_candidates(candidates)
    except BatchInputError as e:
        raise fail(str(e)) from None
    task_map = {t.id: t for t in _load_tasks(tasks, None, None, None)}
    cfg = sandbox_config(
        device, config, {"perf_trials": perf_trials, "compile_baseline": compile_baseline, "cache_dir": cache_dir}
    )
    try:
        exec_cfg = ExecutorConfig(kind=executor, **({"build_workers": build_workers} if build_workers else {}))
    except ValueError as e:
        raise fail(str(e)) from None
    if executor not in ("local", "ray"):
        raise fail(f"--executor {executor!r}: expected local or ray")
    extra = _judge_callback(judge, rubric, "generate", cfg.backend)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(
        json.dumps(
            {
                "sandbox": cfg.model_dump(mode="json"),
                "executor": exec_cfg.model_dump(mode="json"),
                "tasks": tasks,
                "candidates": str(candidates),
                "judge": judge,
                "rubric": rubric,
            },
            indent=2,
        )
    )
    summary = asyncio.run(_run_batch(task_map, rows, cfg, exec_cfg, out, extra, quiet=as_json))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        from rubric_rl.reporting import batch_table

        _console().print(batch_table(summary, out / "verdicts.jsonl"))


def _judge_callback(judge: str, rubric: str, skill: str, backend: str):
    """The per-candidate judge step of a batch (None: no judging)."""
    if judge == "none":
        return None
    from rubric_rl.judge import JudgeConfig, build_request, load_rubric, make_judge

    try:
        rubric_obj = load_rubric(rubric)
        if judge == "offline":
            judge_cfg = JudgeConfig(offline=True, rubric=rubric)
        else:
            import yaml

            raw = yaml.safe_load(_read_text(Path(judge), "judge config")) or {}
            judge_cfg = JudgeConfig.model_validate({"rubric": rubric, **raw})
        judge_impl = make_judge(judge_cfg, rubric_obj)
    except (ValueError, FileNotFoundError) as e:
        raise fail(f"judge: {e}") from None

    async def judge_one(task, program, verdict):
        request = build_request(skill, task.code, program, verdict=verdict, backend=backend, task_id=task.id)
        return {"judgment": (await judge_impl.judge(request)).model_dump(mode="json")}

    return judge_one


async def _run_batch(task_map, rows, cfg, exec_cfg, out, extra, *, quiet: bool):
    import logging
    import sys
    import time

    from rubric_rl.sandbox.batch import load_done, run_batch
    from rubric_rl.sandbox.executors import make_executor

    todo = len(rows) - len(load_done(out / "verdicts.jsonl"))
    if sys.stderr.isatty() and not quiet:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            TextColumn("[bold]evaluating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            transient=False,
        )
        with progress:
            bar = progress.add_task("", total=todo)

            def on_done(record):
                progress.update(bar, advance=1, description=f"{record.candidate_id}: {record.verdict.status}")

            async with make_executor(cfg, exec_cfg) as ex:
                return await run_batch(task_map, rows, ex, out, extra=extra, on_done=on_done)
    log = logging.getLogger("rubric_rl.verify_batch")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    count = {"n": 0, "t": time.monotonic()}

    def on_done_log(record):
        count["n"] += 1
        if count["n"] == todo or time.monotonic() - count["t"] > 10:
            count["t"] = time.monotonic()
            log.info("%d/%d done (last: %s %s)", count["n"], todo, record.candidate_id, record.verdict.status)

    async with make_executor(cfg, exec_cfg) as ex:
        return await run_batch(task_map, rows, ex, out, extra=extra, on_done=on_done_log)


def _compile_report_text(report) -> str:
    lines = [f"compiles: {'yes' if report.ok else 'no'}" + (" (hack findings)" if report.hack else "")]
    lines += [
        f"  build {b.name}: {'ok' if b.ok else 'failed'} in {b.seconds:.1f} s" + (" (split)" if b.split_sources else "")
        for b in report.builds
    ]
    lines += [f"  [{f.severity}] {f.rule} (line {f.line}): {f.message}" for f in report.findings]
    lines += [f"  error: {e}" for e in report.errors]
    return "\n".join(lines)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
