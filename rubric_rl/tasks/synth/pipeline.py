"""Task synthesis end to end: compose candidates, filter them, append the survivors; resumable, with a funnel.

Files, for ``--out tasks.jsonl``:

- ``tasks.jsonl``: the accepted tasks, rows ``{level: null, problem_id, name, code, provenance, filters}``
  (``rubric_rl.tasks.load_tasks`` reads it; ``provenance`` says how each was made, ``filters`` holds every
  filter's measurement);
- ``tasks.funnel.jsonl``: one row per candidate, accepted or not, with the filter that removed it and the
  measurements up to there;
- ``tasks.config.json``: the resolved configuration; ``tasks.summary.json``: the funnel and histograms.

Stages, in order: ``composed`` (an operator chain fits, or the LLM answered with a usable program),
``well_formed`` (Model, get_inputs, get_init_inputs), ``unique`` (not a program already probed),
``decontaminated`` (far enough from every KernelBench problem), then the run-time filters of
``rubric_rl.tasks.synth.probe``. The first stage a candidate fails is the one that removed it.

Candidate ``i`` is drawn from ``random.Random(f"{seed}:{i}")``, so it is the same program whenever it is made.
A candidate's funnel row is written (and fsynced) before its task row; after a kill -9 a rerun cuts any line
left half-written, re-appends the task of an accepted candidate whose task row is missing, and continues with
the candidates not in the funnel: nothing is lost or done twice.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubric_rl import __version__
from rubric_rl.jsonl import repaired_rows
from rubric_rl.tasks.similarity import SimilarityIndex
from rubric_rl.tasks.synth.compose import compose, render
from rubric_rl.tasks.synth.llm import LLMComposer, LLMComposerConfig
from rubric_rl.tasks.synth.ops import SeedTable, load_seed_table
from rubric_rl.tasks.synth.probe import FILTER_ORDER, ProbeConfig
from rubric_rl.tasks.synth.worker import ProbeWorker
from rubric_rl.tasks.task import TaskError, check_reference_source

logger = logging.getLogger(__name__)

FUNNEL = ("composed", "well_formed", "unique", "decontaminated", *FILTER_ORDER)
RUNTIME_WINDOW_MS = {"cuda": (1.0, 100.0), "cpu": (0.1, 20.0)}
# what must match for a rerun to continue an existing output
_GENERATION_KEYS = ("device", "composer", "seed", "min_ops", "max_ops", "dtype", "anchor_probability", "id_offset",
                    "probe", "decontamination")  # fmt: skip


class DecontaminationConfig(BaseModel):
    """Keeping KernelBench's evaluation problems out: thresholds on the nearest problem's similarity."""

    model_config = ConfigDict(extra="forbid")

    against: list[str] = Field(default_factory=list, description="Task sources to decontaminate against.")
    code_threshold: float = Field(default=0.85, gt=0, le=1, description="Code similarity at or above: removed.")
    op_threshold: float = Field(
        default=0.95, gt=0, le=1, description="Operator-sequence similarity at or above: removed (1.0: same ops)."
    )


class SynthConfig(BaseModel):
    """One synthesis run; written beside its output."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(ge=1, description="Tasks to accept (a run with several workers may overshoot by a few).")
    max_candidates: int | None = Field(default=None, ge=1, description="Candidate budget; None: 20 x n.")
    device: Literal["cpu", "cuda"] = Field(default="cpu", description="Device the filters run on.")
    composer: Literal["programmatic", "llm"] = Field(default="programmatic", description="Who writes programs.")
    seed: int = Field(default=0, description="Seed of every draw.")
    min_ops: int = Field(default=2, ge=1, description="Fewest operators fused.")
    max_ops: int = Field(default=5, ge=1, description="Most operators fused.")
    dtype: str = Field(default="float32", description="Dtype of inputs and parameters.")
    anchor_probability: float = Field(default=0.6, ge=0, le=1, description="First op from a heavy family.")
    seed_table: Path | None = Field(default=None, description="Seed-operator table; None: the bundled one.")
    id_offset: int = Field(default=0, ge=0, description="problem_id = id_offset + candidate index.")
    workers: int = Field(default=1, ge=1, description="Candidates probed at once (one worker process each).")
    timeout_s: float = Field(default=300.0, gt=0, description="Limit of one candidate's probe, seconds.")
    probe: ProbeConfig = Field(default_factory=ProbeConfig, description="Run-time filter thresholds.")
    decontamination: DecontaminationConfig = Field(default_factory=DecontaminationConfig)
    llm: LLMComposerConfig | None = Field(default=None, description="Endpoint of the LLM composer.")

    @model_validator(mode="after")
    def _consistent(self) -> SynthConfig:
        if self.max_ops < self.min_ops:
            raise ValueError("max_ops: must be at least min_ops")
        if self.composer == "llm" and self.llm is None:
            raise ValueError("llm: the llm composer needs an endpoint (base_url and model)")
        self.probe.device = self.device
        if "runtime_ms" not in self.probe.model_fields_set:
            self.probe.runtime_ms = RUNTIME_WINDOW_MS[self.device]
        if self.device == "cpu" and "threads" not in self.probe.model_fields_set:
            self.probe.threads = 1  # steady timings on a shared machine; one lane per core
        return self

    @property
    def budget(self) -> int:
        return self.max_candidates or 20 * self.n


def sidecar(out: Path, kind: str) -> Path:
    """``tasks.jsonl`` -> ``tasks.<kind>``."""
    return out.with_name(f"{out.stem}.{kind}")


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


class Synthesizer:
    """Runs (or resumes) one synthesis into ``out``."""

    def __init__(self, config: SynthConfig, out: Path, against: SimilarityIndex | None = None) -> None:
        self.cfg, self.out = config, out
        self.table: SeedTable = load_seed_table(config.seed_table)
        self.index = against
        window = config.probe.runtime_ms
        self.llm = LLMComposer(config.llm, self.table, config.device, window) if config.llm else None
        self.funnel_path, self.summary_path = sidecar(out, "funnel.jsonl"), sidecar(out, "summary.json")
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}  # program sha256 -> the first candidate that had it

    # ---- one candidate -------------------------------------------------------------------------------------
    def candidate(self, i: int, worker: ProbeWorker | None) -> dict[str, Any]:
        """Compose candidate ``i`` and run the filters until one fails; its funnel row (with its task if kept)."""
        cfg, started = self.cfg, time.monotonic()
        rng = random.Random(f"{cfg.seed}:{i}")
        n_ops = rng.randint(cfg.min_ops, cfg.max_ops)
        plan = compose(self.table, cfg.device, rng, n_ops, dtype=cfg.dtype, anchor_probability=cfg.anchor_probability)
        row: dict[str, Any] = {"candidate": i, "composer": cfg.composer, "fusion_size": n_ops, "filters": {}}
        filters = row["filters"]
        code, info = None, {}
        if plan is not None:
            row.update(layout=plan.layout, ops=plan.ops)
            if self.llm is not None:
                code, info = self.llm.compose(plan)
            else:
                code = render(self.table, plan, title=f"Synthesised: {' -> '.join(plan.ops)}.")
        filters["composed"] = {"passed": code is not None, **info}
        if code is None:
            filters["composed"].setdefault("error", "no operator chain fits the rules and limits")
            return self._finish(row, "composed", started)
        row["program_sha256"] = hashlib.sha256(code.encode()).hexdigest()
        try:
            check_reference_source(code, "program")
            filters["well_formed"] = {"passed": True}
        except TaskError as e:
            filters["well_formed"] = {"passed": False, "error": str(e)}
            return self._finish(row, "well_formed", started)
        with self._lock:
            repeat = self._seen.get(row["program_sha256"])
            self._seen.setdefault(row["program_sha256"], i)
        filters["unique"] = {"passed": repeat is None}
        if repeat is not None:
            filters["unique"]["error"] = f"the same program as candidate {repeat}"
            return self._finish(row, "unique", started)
        filters["decontaminated"] = self._decontaminate(code)
        if not filters["decontaminated"]["passed"]:
            return self._finish(row, "decontaminated", started)
        assert worker is not None
        probed = worker.probe(code, cfg.probe.model_dump(mode="json"), cfg.timeout_s)
        filters.update(probed["filters"])
        if probed["rejected_by"] is not None:
            return self._finish(row, probed["rejected_by"], started)
        row["task"] = self._task_row(i, code, row, plan, info)
        return self._finish(row, None, started)

    def _decontaminate(self, code: str) -> dict[str, Any]:
        if self.index is None or not len(self.index):
            return {"passed": True, "skipped": "no task source to decontaminate against"}
        d = self.cfg.decontamination
        nearest = self.index.nearest(code)
        hit = nearest.code_similarity >= d.code_threshold or nearest.op_similarity >= d.op_threshold
        m: dict[str, Any] = {"passed": not hit, "nearest": nearest.model_dump()}
        if hit:
            m["error"] = f"too close to {nearest.task_id} ({nearest.name})"
        return m

    def _task_row(self, i: int, code: str, row: dict[str, Any], plan: Any, info: dict[str, Any]) -> dict[str, Any]:
        cfg = self.cfg
        name = f"synth_{i:05d}_" + "_".join(row["ops"])
        provenance = {
            "generator": "rubric_rl.tasks.synth", "rubric_rl": __version__, "composer": cfg.composer,
            "seed": cfg.seed, "candidate": i, "device": cfg.device, "dtype": cfg.dtype, "ops": row["ops"],
            "layout": row["layout"], "dims": {k: d.value for k, d in plan.dims.items()},
            "seed_table": self.table.digest, "llm": info or None,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }  # fmt: skip
        return {"level": None, "problem_id": cfg.id_offset + i, "name": name[:120], "code": code,
                "provenance": provenance, "filters": row["filters"]}  # fmt: skip

    @staticmethod
    def _finish(row: dict[str, Any], rejected_by: str | None, started: float) -> dict[str, Any]:
        row["accepted"] = rejected_by is None
        row["rejected_by"] = rejected_by
        row["seconds"] = round(time.monotonic() - started, 3)
        return row

    # ---- the run -------------------------------------------------------------------------------------------
    def _check_resume(self) -> None:
        path = sidecar(self.out, "config.json")
        if path.exists():
            old = json.loads(path.read_text())
            changed = [k for k in _GENERATION_KEYS if old.get(k) != self.cfg.model_dump(mode="json").get(k)]
            if old.get("seed_table_digest") not in (None, self.table.digest):
                changed.append("seed_table")
            if changed:
                raise ValueError(f"{self.out} was made with other settings ({', '.join(changed)}): use a new --out")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps({**self.cfg.model_dump(mode="json"), "seed_table_digest": self.table.digest}, indent=2) + "\n"
        )

    def resume_state(self) -> tuple[set[int], int]:
        """(candidates done, tasks accepted), after repairing both files."""
        funnel = repaired_rows(self.funnel_path)
        tasks = repaired_rows(self.out)
        for row in funnel:
            if "program_sha256" in row:
                self._seen.setdefault(row["program_sha256"], row["candidate"])
        have = {t["provenance"]["candidate"] for t in tasks}
        for row in funnel:
            if row["accepted"] and row["candidate"] not in have:
                _append(self.out, row["task"])  # the run died between the two writes
                have.add(row["candidate"])
        return {r["candidate"] for r in funnel}, len(have)

    def run(self, on_candidate: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Synthesise until ``n`` tasks are accepted or the candidate budget is spent; returns the summary."""
        self._check_resume()
        done, accepted = self.resume_state()
        started, made_now, accepted_now = time.monotonic(), 0, 0
        pending = (i for i in itertools.count() if i not in done)
        state = {"accepted": accepted}
        errors: list[BaseException] = []

        def lane() -> None:
            nonlocal made_now, accepted_now
            worker = ProbeWorker()
            try:
                while True:
                    with self._lock:
                        i = next(pending)
                        if errors or state["accepted"] >= self.cfg.n or i >= self.cfg.budget:
                            return
                    row = self.candidate(i, worker)
                    with self._lock:
                        _append(self.funnel_path, row)
                        if row["accepted"]:
                            _append(self.out, row["task"])
                            state["accepted"] += 1
                            accepted_now += 1
                        made_now += 1
                    if on_candidate is not None:
                        on_candidate(row)
            except BaseException as e:  # a bug here must stop the run, not vanish with its thread
                with self._lock:
                    errors.append(e)
            finally:
                worker.close()

        threads = [threading.Thread(target=lane, name=f"synth-{k}") for k in range(self.cfg.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        elapsed = time.monotonic() - started
        summary = summarize(repaired_rows(self.funnel_path))
        summary["this_run"] = {
            "candidates": made_now, "accepted": accepted_now, "elapsed_s": round(elapsed, 1),
            "tasks_per_minute": round(60 * accepted_now / elapsed, 2) if elapsed > 0 else None,
            "candidates_per_minute": round(60 * made_now / elapsed, 2) if elapsed > 0 else None,
        }  # fmt: skip
        self.summary_path.write_text(json.dumps(summary, indent=2) + "\n")
        return summary


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    xs = sorted(xs)
    return {f"p{int(q * 100)}": round(xs[min(len(xs) - 1, int(q * len(xs)))], 4) for q in (0.1, 0.5, 0.9)}


RUNTIME_BUCKETS_MS = (0.1, 1.0, 10.0, 100.0)


def _buckets(xs: list[float]) -> dict[str, int]:
    """Counts of eager medians per decade: '<0.1', '0.1-1', '1-10', '10-100', '>=100' (ms)."""
    edges = RUNTIME_BUCKETS_MS
    names = [f"<{edges[0]:g}"] + [f"{a:g}-{b:g}" for a, b in zip(edges, edges[1:], strict=False)] + [f">={edges[-1]:g}"]
    counts = dict.fromkeys(names, 0)
    for x in xs:
        counts[names[sum(x >= e for e in edges)]] += 1
    return counts


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The funnel (how many each filter removed, in order) and histograms of a funnel file's rows."""
    removed = Counter(r["rejected_by"] for r in rows if not r["accepted"])
    funnel, left = [], len(rows)
    for stage in FUNNEL:
        funnel.append({"stage": stage, "entered": left, "removed": removed.get(stage, 0)})
        left -= removed.get(stage, 0)
    kept = [r for r in rows if r["accepted"]]
    runtime = [r["filters"]["runtime"]["median_ms"] for r in rows if "median_ms" in r["filters"].get("runtime", {})]
    return {
        "candidates": len(rows),
        "accepted": len(kept),
        "acceptance_rate": round(len(kept) / len(rows), 4) if rows else None,
        "funnel": funnel,
        "histograms": {
            "fusion_size_candidates": dict(sorted(Counter(r["fusion_size"] for r in rows).items())),
            "fusion_size_accepted": dict(sorted(Counter(r["fusion_size"] for r in kept).items())),
            "ops_candidates": dict(Counter(op for r in rows for op in r.get("ops", [])).most_common()),
            "ops_accepted": dict(Counter(op for r in kept for op in r.get("ops", [])).most_common()),
            "layouts_accepted": dict(Counter(r.get("layout") for r in kept).most_common()),
        },
        "eager_ms_measured": _quantiles(runtime),
        "eager_ms_buckets": _buckets(runtime),
        "seconds_per_candidate": round(sum(r["seconds"] for r in rows) / len(rows), 3) if rows else None,
    }
