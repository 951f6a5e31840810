"""``rubric-rl train``: check a verl recipe before a GPU hour is spent, then launch it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rubric_rl.cli.common import JsonFlag, fail

if TYPE_CHECKING:
    from rubric_rl.recipes import Preflight, Report


def train(
    recipe: Annotated[
        str,
        typer.Argument(
            help="A recipe YAML, a recipe folder, or a bundled name (one-gpu-try, cuda-agent-staged/stage1_warmup)."
        ),
    ],
    overrides: Annotated[
        list[str] | None, typer.Argument(help="Hydra overrides, as verl takes them: data.train_batch_size=32 ...")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check and print; launch nothing.")] = False,
    gpu_memory_gib: Annotated[float, typer.Option(help="Memory of one GPU of the run's machines.")] = 80.0,
    assume_model: Annotated[
        str | None,
        typer.Option(
            help="recipes/models.yaml entry for the memory estimate when no config.json is "
            "reachable (e.g. qwen2.5-32b)."
        ),
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="Tokenizer for the prompt-length check (default: the model's).")
    ] = None,
    max_rows: Annotated[int | None, typer.Option(help="Rows per data file for the length check (default all).")] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="Submit to this Ray cluster (ray job submit) instead of running here.")
    ] = None,
    show_config: Annotated[bool, typer.Option(help="Print the resolved config.")] = True,
    write_config: Annotated[
        Path | None,
        typer.Option(
            help="Write resolved_config.yaml and launch.json here (default when launching: "
            "the run's trainer.default_local_dir)."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Compose RECIPE with verl's config and OVERRIDES, check it (verl's validate_config, keys, data, reward, judge,
    GPU arithmetic, memory per GPU), print the resolved config and the launch command; launch unless --dry-run.

    Exit code 1 when a check fails (nothing is launched), 2 when the recipe cannot be found."""
    from omegaconf import OmegaConf

    from rubric_rl.recipes import PreflightConfig, launch, launch_command, preflight, run_dir, write_run_record

    overrides = list(overrides or [])
    launching = not dry_run and ray_address is None
    settings = PreflightConfig(
        gpu_memory_gib=gpu_memory_gib,
        launching=launching,
        assume_model=assume_model,
        tokenizer=tokenizer,
        max_rows=max_rows,
    )
    result = preflight(recipe, overrides, settings)
    report = result.report
    if result.recipe is None:
        raise fail(report.findings[0].message)
    command = launch_command(result.recipe, overrides, result.config or {}, ray_address) if result.config else []
    _print(result, command, show_config, as_json)
    if not report.ok:
        raise typer.Exit(code=1)
    assert result.recipe is not None and result.config is not None
    if write_config is not None or not dry_run:
        target = write_config if write_config is not None else run_dir(result.config)
        resolved_yaml = OmegaConf.to_yaml(result.composed, resolve=True)
        out = write_run_record(target, resolved_yaml, result.recipe, overrides, command)
        typer.secho(f"resolved config written to {out / 'resolved_config.yaml'}", err=True)
    if not dry_run:
        raise typer.Exit(code=launch(command))


def _print(result: Preflight, command: list[str], show_config: bool, as_json: bool) -> None:
    """The resolved config, the findings and the launch command (or all of it as one JSON object)."""
    import shlex

    from omegaconf import OmegaConf

    report = result.report
    if as_json:
        body = {
            "recipe": report.recipe,
            "entrypoint": report.entrypoint,
            "ok": report.ok,
            "command": command,
            "findings": [f.model_dump() for f in report.findings],
            "config": result.config if show_config else None,
        }
        typer.echo(json.dumps(body, indent=2, default=str))
        return
    if show_config and result.composed is not None:
        typer.secho(f"# resolved config of {report.recipe}", bold=True)
        typer.echo(OmegaConf.to_yaml(result.composed, resolve=True))
    _print_findings(report)
    if command:
        typer.secho("launch command:", bold=True)
        typer.echo("  " + " ".join(shlex.quote(c) for c in command))


def _print_findings(report: Report) -> None:
    colours = {"error": typer.colors.RED, "warning": typer.colors.YELLOW, "info": None}
    for finding in report.findings:
        typer.secho(finding.line(), fg=colours[finding.level])
    errors, warnings = len(report.errors), sum(f.level == "warning" for f in report.findings)
    verdict = "ready to launch" if report.ok else "NOT ready: fix the errors above"
    typer.secho(
        f"{report.recipe} ({report.entrypoint}): {errors} error(s), {warnings} warning(s): {verdict}",
        bold=True,
        fg=typer.colors.GREEN if report.ok else typer.colors.RED,
    )
