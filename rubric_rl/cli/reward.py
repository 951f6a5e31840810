"""``rubric-rl reward``: the rewards of a stored run, recomputed (under its own config or another one)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_rl.cli.common import JsonFlag, console, fail

reward_app = typer.Typer(no_args_is_help=True, help="Recompute and compare the rewards of a stored run.")


def compare(old: list[Any], new: list[Any]) -> dict[str, Any]:
    """Per data source: samples, masked, mean score before and after; how many scores changed and by how much."""
    sources: dict[str, dict[str, Any]] = {}
    changed, max_diff = 0, 0.0
    for a, b in zip(old, new, strict=True):
        row = sources.setdefault(a.data_source, {"samples": 0, "masked": 0, "old": [], "new": []})
        row["samples"] += 1
        row["masked"] += int(b.masked)
        row["old"].append(a.score)
        row["new"].append(b.score)
        diff = abs(a.score - b.score)
        changed += diff > 0
        max_diff = max(max_diff, diff)
    table = {
        s: {
            "samples": r["samples"],
            "masked": r["masked"],
            "old_mean": math.fsum(r["old"]) / r["samples"],
            "new_mean": math.fsum(r["new"]) / r["samples"],
        }
        for s, r in sorted(sources.items())
    }
    return {"samples": len(old), "changed": changed, "max_abs_diff": max_diff, "by_data_source": table}


@reward_app.command("recompute")
def recompute_cmd(
    ledger: Annotated[Path, typer.Argument(help="A run directory, its ledger/ directory, or one ledger .jsonl.")],
    config: Annotated[
        Path | None, typer.Option("--config", help="YAML RewardConfig to score under (default: the run's own).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the recomputed records here (JSONL).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recompute every reward of a stored run from its records; with --config, under another reward scheme."""
    from rubric_rl.reward import RewardConfig, RewardConfigError, read_ledger, recompute, write_ledger
    from rubric_rl.reward.ledger import saved_config

    try:
        records = list(read_ledger(ledger))
    except FileNotFoundError as e:
        raise fail(str(e)) from None
    if not records:
        raise fail(f"{ledger}: no reward records")
    try:
        cfg = RewardConfig.from_yaml(config) if config is not None else saved_config(ledger)
    except RewardConfigError as e:
        raise fail(str(e)) from None
    if cfg is None:
        raise fail(f"{ledger}: no reward_config.json beside the ledger; pass --config")
    new = recompute(records, cfg)
    result = compare(records, new)
    result["config_hash"] = {"old": sorted({r.config_hash for r in records}), "new": cfg.scoring_hash()}
    if out is not None:
        write_ledger(new, out)
        result["out"] = str(out)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"rewards of {ledger} recomputed")
    for col in ("data source", "samples", "masked", "old mean", "new mean"):
        table.add_column(col, justify="left" if col == "data source" else "right")
    for source, r in result["by_data_source"].items():
        table.add_row(source, str(r["samples"]), str(r["masked"]), f"{r['old_mean']:.4f}", f"{r['new_mean']:.4f}")
    c = console()
    c.print(table)
    c.print(f"{result['changed']} of {result['samples']} score(s) changed (max |diff| {result['max_abs_diff']:.6g})")
