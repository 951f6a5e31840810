"""``rubric-rl report``: KernelBench metrics of rollout directories, side by side, as JSON, Markdown and HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rubric_rl.cli.common import JsonFlag, console, fail


def report(
    runs: Annotated[list[Path], typer.Argument(help="Rollout directories (rubric-rl rollout --out DIR).")],
    out: Annotated[Path, typer.Option(help="Report directory: summary.json, report.md, report.html, plots/.")],
    label: Annotated[
        list[str] | None, typer.Option("--label", help="Name of each run in the report, in order; repeatable.")
    ] = None,
    wandb_project: Annotated[
        str | None, typer.Option(help="Also log the metrics to this wandb project (WANDB_MODE=offline works).")
    ] = None,
    wandb_entity: Annotated[str | None, typer.Option(help="wandb entity (team or user).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write the report of one or more rollout runs (several: side by side)."""
    from pydantic import ValidationError

    from rubric_rl.reports.report import build_report

    try:
        summary = build_report(runs, out, label)
    except (FileNotFoundError, ValueError, ValidationError) as e:
        raise fail(str(e)) from None
    if wandb_project:
        from rubric_rl.reports.wandb_log import log_to_wandb

        try:
            summary["wandb_dirs"] = log_to_wandb(summary, out, wandb_project, wandb_entity)
        except RuntimeError as e:
            raise fail(str(e)) from None
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"report in {out}")
    for col in ("run / track", "tasks", "correct", "fast_1 eager", "fast_1 compile", "geomean eager"):
        table.add_column(col)
    for run in summary["runs"]:
        for track, m in run["tracks"].items():
            g = m["geomean_speedup"]["eager"]
            table.add_row(
                f"{run['label']} / {track}",
                str(m["tasks"]),
                f"{100 * m['correct_rate']:.1f}%",
                f"{100 * m['fast_p']['eager']['1']:.1f}%",
                f"{100 * m['fast_p']['compile']['1']:.1f}%",
                "-" if g is None else f"{g:.3f}x",
            )
    console().print(table)
