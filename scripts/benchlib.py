"""Shared pieces of the benchmark scripts: candidate discovery, table printing, JSON output."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rubric_rl.sandbox.measure.timing import paired_ratio, summarize

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CANDIDATES = REPO / "benchmarks" / "kernelbench"


def default_problems() -> Path:
    for p in (REPO / ".device" / "problems.jsonl", REPO.parent / "shared" / "kernelbench" / "problems.jsonl"):
        if p.exists():
            return p
    raise SystemExit("no problems file: pass --problems (KernelBench problems.jsonl)")


def sandbox_overrides(pairs: list[str]) -> dict:
    """``--set SECTION.FIELD=VALUE`` (or ``FIELD=VALUE`` for a top-level field) pairs as ``SandboxConfig.updated``
    changes, VALUE read as JSON where it parses (false, 3, [1]) and as a string otherwise; the benches compare a
    setting against its default in one device call."""
    from pydantic import BaseModel

    from rubric_rl.sandbox import SandboxConfig

    out: dict = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        section, _, name = key.rpartition(".")
        field = SandboxConfig.model_fields.get(section or name)
        kind = field.annotation if field is not None else None
        known = field is not None and (
            (not section and not (isinstance(kind, type) and issubclass(kind, BaseModel)))
            or (section and isinstance(kind, type) and issubclass(kind, BaseModel) and name in kind.model_fields)
        )
        if not eq or not known:
            raise SystemExit(f"--set {pair!r}: expected FIELD=VALUE with a SandboxConfig field (e.g. timing.l2_flush)")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if section:
            out.setdefault(section, {})[name] = value
        else:
            out[name] = value
    return out


def discover(candidates_dir: Path, tasks: dict) -> list[tuple[str, Path]]:
    """(task id, file) for every candidate file named '<task id>_<anything>.py' whose task exists."""
    found = []
    for path in sorted(candidates_dir.glob("L*-*_*.py")):
        task_id = path.name.split("_", 1)[0]
        if task_id in tasks:
            found.append((task_id, path))
    return found


def spread(found: list[tuple[str, Path]], n: int) -> list[tuple[str, Path]]:
    """Up to n candidates, taken round-robin over levels so every level is represented."""
    by_level: dict[str, list[tuple[str, Path]]] = {}
    for item in found:
        by_level.setdefault(item[0].split("-")[0], []).append(item)
    out: list[tuple[str, Path]] = []
    while len(out) < n and any(by_level.values()):
        for level in sorted(by_level):
            if by_level[level] and len(out) < n:
                out.append(by_level[level].pop(0))
    return out


async def run_logged(ex, items: list[tuple], log: Path, started: float | None = None) -> tuple[list, float]:
    """All ``items`` (name, task, program) through the executor at once; a line per Verdict as it arrives,
    printed and appended to ``log`` (JSONL), so a run cut short still says where the time went. ``started``:
    the clock the lines count from (default: now); returns the Verdicts in order and this call's seconds."""
    began = time.monotonic()
    started = began if started is None else started
    log.parent.mkdir(parents=True, exist_ok=True)

    async def one(name: str, task, program: str):
        v = await ex.evaluate(task, program)
        at = time.monotonic() - started
        with log.open("a") as f:
            f.write(json.dumps({"candidate": name, "at_s": at, **v.model_dump(mode="json")}) + "\n")
        d = v.durations
        print(
            f"  +{at:6.1f}s {name}: {v.status} build {d.build_s:.1f}s "
            f"reference {d.reference_s:.1f}s load {d.load_s:.1f}s correctness {d.correctness_s:.1f}s "
            f"compile {d.compile_s:.1f}s timing {d.timing_wall_s:.1f}s profile {d.profile_s:.1f}s "
            f"teardown {d.teardown_s:.1f}s waited {d.device_wait_s:.1f}s "
            f"total {d.total_s:.1f}s speedup {fmt(v.speedup_eager, '.3f')}"
            + (f" | {v.errors[0][:160]}" if v.status != "correct" and v.errors else ""),
            flush=True,
        )
        return v

    verdicts = await asyncio.gather(*(one(name, task, program) for name, task, program in items))
    return list(verdicts), time.monotonic() - began


def stage_means(verdicts: list) -> dict[str, float]:
    """Mean seconds per stage over ``verdicts`` (where an evaluation's time went, on average)."""
    if not verdicts:
        return {}
    rows = [v.durations.model_dump() for v in verdicts]
    means = {k: round(sum(r[k] for r in rows) / len(rows), 3) for k, x in rows[0].items() if not isinstance(x, dict)}
    inside = sorted({k for r in rows for k in r.get("worker", {})})
    means.update({f"worker.{k}": round(sum(r["worker"].get(k, 0.0) for r in rows) / len(rows), 3) for k in inside})
    return means


def select(found: list[tuple[str, Path]], n: int, only: str | None) -> list[tuple[str, Path]]:
    """``only`` (comma-separated candidate names or task ids), in that order; else ``spread(found, n)``."""
    if not only:
        return spread(found, n)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    chosen = []
    for w in wanted:
        hits = [item for item in found if item[1].stem == w or item[0] == w]
        if not hits:
            raise SystemExit(f"--only: no candidate named {w!r} (names are benchmarks/kernelbench file stems)")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


def cv(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    return statistics.pstdev(values) / statistics.fmean(values)


def within_evaluation_cv(eager_ms: list[float], candidate_ms: list[float], parts: int = 4) -> float | None:
    """The speedup's sampling spread inside one evaluation: the CV of the ratio of medians over ``parts``
    consecutive slices of its rounds, divided by sqrt(parts) (the standard error of the whole-run estimate). Far
    below the CV across evaluations, it says the spread comes from each worker process's own level (on an H100,
    L3-34's candidate ran flat within a process at 0.897-0.940 ms from one process to the next), which more
    timing rounds cannot remove."""
    n = min(len(eager_ms), len(candidate_ms)) // parts
    if n < 2:
        return None
    ratios = [
        statistics.median(eager_ms[i * n : (i + 1) * n]) / statistics.median(candidate_ms[i * n : (i + 1) * n])
        for i in range(parts)
    ]
    spread = cv(ratios)
    return None if spread is None else spread / math.sqrt(parts)


DISTURBED_TAIL = 1.15


def disturbed_timings(named: list[tuple[str, object]], tail: float = DISTURBED_TAIL) -> list[dict]:
    """Evaluations whose timed rounds were stretched by something besides themselves: some model's p90 round over
    its median above ``tail``. Alone on a GPU, rounds of one model keep within a few percent of each other; on an
    H100 the evaluations timed while other tasks' torch.compile warm-ups tuned their kernels had p90/median
    1.2-2.1 (L1-20's speedup read 1.107 for 1.004), and none of the warm passes' 64 did. A launch-bound program
    shows the host's slow spells the same way (L3-34's eager: 1.17 and 1.36 in two of five evaluations)."""
    out = []
    for name, v in named:
        rounds = v.timings.rounds_ms if v.timings is not None else {}
        stats = {model: summarize(ms) for model, ms in rounds.items() if len(ms) >= 10}
        tails = {model: round(st.p90_ms / st.median_ms, 3) for model, st in stats.items() if st.median_ms > 0}
        if tails and max(tails.values()) > tail:
            out.append({"candidate": name, "speedup_eager": v.speedup_eager, "p90_over_median": tails})
    return out


def agreement(a_result: dict, evaluations: list) -> dict:
    """(a)'s result for one candidate (KernelBench's way) beside the executor's evaluations of it ((b), then the
    warm passes): whether the statuses agree, and whether (a)'s speedup lies within the executor's own measured
    noise, twice the CV of its speedups over the passes (None: fewer than two speedups to measure it by)."""
    a_status = "correct" if a_result.get("correct") else ("incorrect" if a_result.get("compiled") else "compile_error")
    speedups = [v.speedup_eager for v in evaluations if v.speedup_eager]
    spread = cv(speedups)
    a_speedup, b_speedup = a_result.get("speedup"), evaluations[0].speedup_eager if evaluations else None
    within = None
    if spread is not None and a_speedup and speedups:
        within = abs(a_speedup / statistics.median(speedups) - 1) <= 2 * spread
    return {
        "candidate": a_result["candidate"],
        "a_status": a_status,
        "b_status": evaluations[0].status if evaluations else None,
        "statuses_agree": bool(evaluations) and a_status == evaluations[0].status,
        "a_speedup": a_speedup,
        "b_speedup": b_speedup,
        "executor_speedups": speedups,
        "executor_speedup_cv": spread,
        "a_within_noise": within,
    }


def correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r of two equally long series; None for fewer than three pairs or a constant series."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return None


def fmt(x, spec: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*r)
    Console(width=200).print(table)


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))


class CutGuard:
    """A phase's finished results, kept as they come, so that a bench stopped by SIGTERM (``gpu_check.sh`` runs each
    phase under ``timeout`` for what is left of its BUDGET_S) still reports what it did: on SIGTERM, after
    ``install``, the guard hands them and the phase's seconds so far to the phase's ``report`` and exits 124 (as
    ``timeout`` does). Without it a cut phase left nothing but its log."""

    def __init__(self) -> None:
        self.done: list[dict] = []
        self.started = time.monotonic()
        self._report: Callable[[list[dict], float], None] | None = None

    def start(self, report: Callable[[list[dict], float], None]) -> None:
        self.done, self.started, self._report = [], time.monotonic(), report

    def add(self, result: dict) -> dict:
        self.done.append(result)
        return result

    def stop(self) -> None:
        self._report = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum: int, frame: object) -> None:
        report, self._report = self._report, None
        if report is not None:
            report(list(self.done), time.monotonic() - self.started)
        sys.stdout.flush()
        os._exit(124)  # the executor's threads and workers need no orderly end: their processes die with this one


def candidate_records(items: list[tuple], verdicts: dict[str, list], builds: dict[str, dict]) -> list[dict]:
    """One record per candidate over its repeated Verdicts: build seconds (cold, cached), correctness and timing
    seconds, median speedups and their coefficient of variation across the evaluations."""
    records = []
    for name, task, _ in items:
        vs = verdicts[name]
        se = [v.speedup_eager for v in vs if v.speedup_eager]
        sc = [v.speedup_compile for v in vs if v.speedup_compile]
        # The same evaluations' rounds: their speedups as medians of per-round ratios (the alternative estimator),
        # so the two spreads compare on identical timings, and each one's spread within itself.
        rounds = [
            v.timings.rounds_ms for v in vs if v.speedup_eager and v.timings and "candidate" in v.timings.rounds_ms
        ]
        paired = [paired_ratio(r["eager"], r["candidate"]) for r in rounds]
        # The host's launch rate where each evaluation timed (timing.host_probe), beside its speedup: a launch-bound
        # program's speedup that moves with it is the host's drift, not the protocol's noise.
        probed = [(v.speedup_eager, v.diagnostics.host_launch_us) for v in vs if v.speedup_eager and v.timings]
        probed = [(s, launch) for s, launch in probed if launch]
        within = [w for r in rounds if (w := within_evaluation_cv(r["eager"], r["candidate"])) is not None]
        records.append(
            {
                "candidate": name,
                "task": task.id,
                "problem": task.name,
                "statuses": sorted({v.status for v in vs}),
                "evaluations": len(vs),
                **builds[name],
                "correctness_s": statistics.median(v.durations.correctness_s for v in vs),
                "timing_s": statistics.median(v.durations.timing_s for v in vs),
                "speedup_eager": statistics.median(se) if se else None,
                "speedup_compile": statistics.median(sc) if sc else None,
                "speedups_eager": se,
                "cv_speedup_eager": cv(se),
                "cv_speedup_eager_paired": cv(paired),
                "cv_speedup_eager_within": statistics.median(within) if within else None,
                "cv_speedup_compile": cv(sc),
                "host_launch_us": [launch for _, launch in probed],
                "cv_host_launch": cv([launch for _, launch in probed]),
                "r_speedup_host_launch": correlation([s for s, _ in probed], [launch for _, launch in probed]),
                "own_kernel_share": vs[-1].own_kernel_time_share,
                "hack_rules": sorted({r for v in vs for r in v.hack_rules}),
                "errors": vs[-1].errors[:2],
            }
        )
    return records


def print_candidate_table(title: str, records: list[dict]) -> dict:
    """Print the per-candidate table and return its summary (CV statistics, honest candidates flagged hack)."""
    rows = [
        [
            r["candidate"],
            "/".join(r["statuses"]),
            fmt(r["build_cold_s"], ".1f"),
            fmt(r["build_cached_s"], ".3f"),
            fmt(r["correctness_s"]),
            fmt(r["timing_s"]),
            fmt(r["speedup_eager"], ".3f"),
            fmt(r["speedup_compile"], ".3f"),
            fmt(r["cv_speedup_eager"] and 100 * r["cv_speedup_eager"], ".2f"),
            fmt(r["cv_speedup_eager_paired"] and 100 * r["cv_speedup_eager_paired"], ".2f"),
            fmt(r["cv_speedup_eager_within"] and 100 * r["cv_speedup_eager_within"], ".2f"),
            fmt(r["cv_host_launch"] and 100 * r["cv_host_launch"], ".2f"),
            fmt(r["r_speedup_host_launch"], ".2f"),
            fmt(r["own_kernel_share"] and 100 * r["own_kernel_share"], ".0f"),
        ]
        for r in records
    ]
    columns = ["candidate", "status", "build cold s", "build cached s", "correctness s", "timing s"]
    columns += ["speedup eager", "speedup compile", "CV % (eager)", "CV % (paired rounds)", "CV % (within one)"]
    columns += ["CV % (host launch)", "r (speedup, launch)", "own kernel %"]
    print_table(title, columns, rows)
    cvs = [r["cv_speedup_eager"] for r in records if r["cv_speedup_eager"] is not None]
    summary = {
        "candidates": len(records),
        "median_cv_speedup_eager": statistics.median(cvs) if cvs else None,
        "max_cv_speedup_eager": max(cvs) if cvs else None,
        "cv_under_2pct": sum(1 for c in cvs if c < 0.02),
        "cv_measured": len(cvs),
        "false_positive_hacks": [r["candidate"] for r in records if "hack" in r["statuses"]],
    }
    median_cv = summary["median_cv_speedup_eager"]
    print(
        f"median CV of speedup vs eager: {fmt(median_cv and 100 * median_cv)}% "
        f"({summary['cv_under_2pct']}/{len(cvs)} under 2%); "
        f"honest candidates flagged hack: {summary['false_positive_hacks'] or 'none'}"
    )
    return summary
