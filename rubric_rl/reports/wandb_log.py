"""Report metrics to Weights & Biases, one wandb run per rollout run and track.

wandb reads its own environment (``WANDB_MODE=offline`` writes under ``WANDB_DIR`` without a network; an API key
comes from ``WANDB_API_KEY``). It is part of the ``train`` extra; asking for it without it installed is an error
that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def flatten(prefix: str, value: Any, out: dict[str, float]) -> None:
    """Numeric leaves of nested dicts as ``a/b/c`` keys."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}/{k}" if prefix else str(k), v, out)
    elif isinstance(value, bool):
        out[prefix] = float(value)
    elif isinstance(value, (int, float)):
        out[prefix] = float(value)


def log_to_wandb(summary: dict[str, Any], report_dir: Path, project: str, entity: str | None = None) -> list[str]:
    """One wandb run per (run, track): its metrics, its per-problem table and the report's plots; returns the
    wandb run directories."""
    try:
        import wandb
    except ImportError:
        raise RuntimeError("--wandb-project needs wandb: pip install 'rubric-rl[train]' (or wandb)") from None
    dirs = []
    for run in summary["runs"]:
        for track, metrics in run["tracks"].items():
            flat: dict[str, float] = {}
            flatten("", metrics, flat)
            wb = wandb.init(
                project=project,
                entity=entity,
                name=f"{run['label']}/{track}",
                config={"run": run["name"], "label": run["label"], "track": track, "dir": run["dir"]},
                dir=str(report_dir),
                reinit=True,
            )
            rows = [p for p in run["problems"] if p["track"] == track]
            if rows:
                columns = [k for k in rows[0] if k != "hack_rules"]
                wb.log({"problems": wandb.Table(columns=columns, data=[[p[c] for c in columns] for p in rows])})
            for rel in summary.get("plots", []):
                wb.log({Path(rel).stem: wandb.Image(str(report_dir / rel))})
            wb.summary.update(flat)
            dirs.append(str(wb.dir))
            wb.finish()
    return dirs
