"""Training-time reward metrics: means of every component per data source, and the rates that tell a run's
health (compile, correct, hack, judge failure, masked), over windows of scored samples.

verl 0.9.1 logs a reward's extra keys only at validation, so during training these windows (and the ledger)
are where the breakdown survives. Each window goes to every sink: a JSONL file beside the ledger, and wandb
when configured (a run of its own, ``job_type=reward``, in the trainer's group).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

RATES = ("compiled", "correct", "hack", "judge_failed", "masked")


class MetricsSink(Protocol):
    def emit(self, step: int, metrics: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class RewardMetrics:
    """Accumulates sample rows; every ``window`` rows (or on ``flush``) emits one set of metrics."""

    def __init__(self, window: int, sinks: list[MetricsSink]) -> None:
        self.window = window
        self.sinks = sinks
        self.rows: list[dict[str, Any]] = []
        self.step = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.window:
            self.flush()

    def flush(self) -> dict[str, float]:
        if not self.rows:
            return {}
        metrics = summarize(self.rows)
        self.rows = []
        self.step += 1
        for sink in self.sinks:
            try:
                sink.emit(self.step, metrics)
            except Exception as e:  # a metrics backend must not take the reward down
                log.warning("reward metrics sink %s failed: %s", type(sink).__name__, e)
        return metrics

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    """``reward/<source>/<name>``: score and component means (over the samples that have the component), rates
    of the flags, and sample counts; ``<source>`` is each data source and ``all``."""
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_source[str(row.get("data_source", "unknown"))].append(row)
        by_source["all"].append(row)
    out: dict[str, float] = {}
    for source, group in sorted(by_source.items()):
        prefix = f"reward/{source}"
        out[f"{prefix}/samples"] = float(len(group))
        out[f"{prefix}/score/mean"] = math.fsum(float(r["score"]) for r in group) / len(group)
        unmasked = [float(r["score"]) for r in group if not r.get("masked")]
        if unmasked:
            out[f"{prefix}/score_unmasked/mean"] = math.fsum(unmasked) / len(unmasked)
        for rate in RATES:
            out[f"{prefix}/{rate}_rate"] = sum(1.0 for r in group if r.get(rate)) / len(group)
        values: dict[str, list[float]] = defaultdict(list)
        for r in group:
            for name, value in (r.get("components") or {}).items():
                values[name].append(float(value))
        for name, vs in sorted(values.items()):
            out[f"{prefix}/{name}/mean"] = math.fsum(vs) / len(vs)
    return out


class JsonlSink:
    """One JSON line per window: ``{"step", "time", "metrics"}``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, step: int, metrics: dict[str, float]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, "time": time.time(), "metrics": metrics}) + "\n")

    def close(self) -> None:
        pass


class WandbSink:
    """A wandb run of its own (``job_type=reward``), started at the first window."""

    def __init__(self, project: str, group: str | None, mode: str, directory: Path | None, config: dict[str, Any]):
        self.kwargs: dict[str, Any] = {
            "project": project,
            "group": group,
            "mode": mode,
            "job_type": "reward",
            "config": config,
            "dir": str(directory) if directory is not None else None,
            "reinit": "create_new",
        }
        self.run: Any = None

    def emit(self, step: int, metrics: dict[str, float]) -> None:
        if self.run is None:
            import wandb

            self.run = wandb.init(**self.kwargs)
        self.run.log({**metrics, "reward/window": step})

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
