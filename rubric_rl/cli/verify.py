"""``rubric-rl verify`` and ``verify-batch``: Verdicts for one candidate or a file of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_rl.cli.common import JsonFlag, console, fail, read_text, read_yaml_mapping, show_record
from rubric_rl.cli.tasks import load_task_source


def sandbox_config(
    device: str | None,
    config_file: Path | None,
    overrides: dict[str, Any],
):
    """SandboxConfig from a YAML file (optional), then CLI overrides (``{"timing.trials": 5}``); errors name the
    field."""
    from pydantic import ValidationError

    from rubric_rl.sandbox import SandboxConfig

    data = read_yaml_mapping(config_file, "SandboxConfig") if config_file is not None else {}
    if device is None and "backend" not in data:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device is not None:
        data["backend"] = device
    for dotted, value in overrides.items():  # "section.field" or a top-level field
        if value is not None:
            *sections, name = dotted.split(".")
            node = data
            for section in sections:
                node = node.setdefault(section, {})
            node[name] = value
    try:
        return SandboxConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise fail(f"config field {'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None


DeviceOpt = Annotated[str | None, typer.Option("--device", help="cuda or cpu (default: cuda if available).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="YAML file of SandboxConfig fields.")]


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
    from rubric_rl.sandbox.run.proctree import end_with_descendants_on_signal

    end_with_descendants_on_signal()
    ref_text = read_text(reference, "reference")
    cand_text = read_text(candidate, "candidate")
    from rubric_rl.tasks import TaskError, check_reference_source

    try:
        check_reference_source(ref_text, str(reference))
    except TaskError as e:
        raise fail(str(e)) from None
    cfg = sandbox_config(
        device,
        config,
        {
            "correctness.trials": trials,
            "timing.trials": perf_trials,
            "timing.enabled": timing,
            "timing.compile_baseline": compile_baseline,
            "timing.compile_mode": compile_mode,
            "build.cache_dir": cache_dir,
        },
    )
    from rubric_rl.sandbox import Evaluator

    if compile_only:
        report = Evaluator(cfg).check_compiles(cand_text, arch=cfg.build.arch or "9.0")
        typer.echo(report.model_dump_json(indent=2) if as_json else _compile_report_text(report))
        return
    verdict = Evaluator(cfg).evaluate(ref_text, cand_text, task_id=reference.stem)

    def panel():
        from rubric_rl.reporting import verdict_panel

        return verdict_panel(verdict, title=f"{reference.name} <- {candidate.name}")

    show_record(verdict.model_dump_json(indent=2), out, as_json, panel)


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
    from rubric_rl.sandbox.run.proctree import end_with_descendants_on_signal

    end_with_descendants_on_signal()
    import asyncio

    from rubric_rl.batch import BatchInputError, read_candidates
    from rubric_rl.sandbox.executors import ExecutorConfig

    try:
        rows = read_candidates(candidates)
    except BatchInputError as e:
        raise fail(str(e)) from None
    task_map = {t.id: t for t in load_task_source(tasks, None, None, None)}
    cfg = sandbox_config(
        device,
        config,
        {"timing.trials": perf_trials, "timing.compile_baseline": compile_baseline, "build.cache_dir": cache_dir},
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

        console().print(batch_table(summary, out / "verdicts.jsonl"))


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

            raw = yaml.safe_load(read_text(Path(judge), "judge config")) or {}
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

    from rubric_rl.batch import load_done, run_batch
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
