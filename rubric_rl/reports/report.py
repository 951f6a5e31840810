"""``rubric-rl report``: one or more rollout directories -> ``summary.json``, ``report.md``, ``report.html`` and
``plots/*.png``. Several directories are reported side by side (a base model against a trained one); policy tracks
are never mixed. Numbers come only from the records (``results.jsonl``, ``turns.jsonl``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rubric_rl.reports.document import Document, fmt, pct
from rubric_rl.reports.load import RunRecords, load_runs
from rubric_rl.reports.metrics import P_VALUES, p_key, problem_row, run_metrics
from rubric_rl.reports.plots import write_plots

DEFINITIONS = (
    "Each task counts once, by its kept program (the fastest correct one, else its last). correct rate = correct / "
    "N. fast_p = share of the N tasks whose program is correct and more than p times faster than the baseline "
    "(eager PyTorch, or torch.compile); an unmeasured speedup never counts. Noise-aware fast_p counts a program only "
    "when L > p, L being the 10th percentile of its paired per-round speedups (round r of the baseline over round r "
    "of the program, from the Verdict's timed rounds): it beat p in at least 90% of its rounds. Geometric means are "
    "over correct programs with a measured speedup. Tracks (own kernels only; libraries allowed) are reported apart."
)


def summarize_runs(runs: list[RunRecords]) -> dict[str, Any]:
    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "definitions": DEFINITIONS,
        "p_values": list(P_VALUES),
        "runs": [
            {
                "label": run.label,
                "name": run.name,
                "dir": run.dir,
                "tracks": run_metrics(run.results, run.turns),
                "problems": [problem_row(r) for r in sorted(run.results, key=_task_order)],
            }
            for run in runs
        ],
    }


def _task_order(r: Any) -> tuple[int, int, str]:
    return (r.level if r.level is not None else 99, _num(r.task_id), r.task_id)


def _num(task_id: str) -> int:
    tail = task_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _columns(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{run['label']} / {track}", m) for run in summary["runs"] for track, m in run["tracks"].items()]


def _overview(doc: Document, cols: list[tuple[str, dict[str, Any]]]) -> None:
    doc.heading("Overview")
    rows: list[list[Any]] = [
        ["tasks", *(m["tasks"] for _, m in cols)],
        ["correct rate", *(pct(m["correct_rate"]) for _, m in cols)],
        ["geomean speedup vs eager", *(fmt(m["geomean_speedup"]["eager"]) for _, m in cols)],
        ["geomean speedup vs compile", *(fmt(m["geomean_speedup"]["compile"]) for _, m in cols)],
        ["fast_1 vs eager", *(pct(m["fast_p"]["eager"]["1"]) for _, m in cols)],
        ["fast_1 vs compile", *(pct(m["fast_p"]["compile"]["1"]) for _, m in cols)],
        ["correct with timed rounds", *(m["timed_with_rounds"] for _, m in cols)],
        ["turns to first correct (mean)", *(fmt(m["turns_to_first_correct"]["mean"]) for _, m in cols)],
        ["never correct", *(m["turns_to_first_correct"]["never"] for _, m in cols)],
        ["seconds per task (mean)", *(fmt(m["seconds_per_task"]["mean"]) for _, m in cols)],
        ["tokens per task (mean)", *(fmt(m["tokens_per_task"]["mean"]) for _, m in cols)],
    ]
    doc.table(["metric", *(name for name, _ in cols)], rows)
    doc.heading("fast_p")
    table: list[list[Any]] = []
    for name, m in cols:
        for key in ("eager", "eager_noise_aware", "compile", "compile_noise_aware"):
            label = key.replace("_noise_aware", " (noise-aware)")
            table.append([name, label, *(pct(m["fast_p"][key][p_key(p)]) for p in P_VALUES)])
    doc.table(["run / track", "against", *(f"p={p_key(p)}" for p in P_VALUES)], table)


def _failures(doc: Document, cols: list[tuple[str, dict[str, Any]]]) -> None:
    doc.heading("Hacks and failures")
    doc.para(
        "final: the kept program's status per task; turns: every coder turn's Verdict; hack rules: error findings "
        "over all turns; no program: answers without an extractable program, by reason."
    )
    keys: list[tuple[str, str]] = []
    for section in ("final_status", "turn_status", "hack_rules", "no_program", "stop_reasons"):
        names = sorted({k for _, m in cols for k in m["failures"][section]})
        keys += [(section, k) for k in names]
    rows = [[f"{s.replace('_', ' ')}: {k}", *(m["failures"][s].get(k, 0) for _, m in cols)] for s, k in keys]
    rows += [
        [f"{k.replace('_', ' ')}", *(m["failures"][k] for _, m in cols)] for k in ("infra_errors", "endpoint_errors")
    ]
    doc.table(["count", *(name for name, _ in cols)], rows)


def _stages(doc: Document, cols: list[tuple[str, dict[str, Any]]]) -> None:
    doc.heading("Time per task by stage")
    stages = sorted({k for _, m in cols for k in m["stage_seconds_per_task"]})
    rows = [[s, *(fmt((m["stage_seconds_per_task"].get(s) or {}).get("mean")) for _, m in cols)] for s in stages]
    rows.append(["whole task", *(fmt(m["seconds_per_task"]["mean"]) for _, m in cols)])
    doc.table(["mean seconds", *(name for name, _ in cols)], rows)


def _problems(doc: Document, summary: dict[str, Any]) -> None:
    doc.heading("Per problem")
    runs = summary["runs"]
    if len(runs) > 1:
        ids = sorted({p["task_id"] for r in runs for p in r["problems"]}, key=lambda t: (t.split("-")[0], _num(t)))
        by = [{p["task_id"]: p for p in r["problems"]} for r in runs]
        headers = ["task"] + [f"{r['label']}: {c}" for r in runs for c in ("status", "vs eager", "vs compile")]
        rows = []
        for t in ids:
            row: list[Any] = [t]
            for b in by:
                p = b.get(t)
                row += [p["status"], fmt(p["speedup_eager"]), fmt(p["speedup_compile"])] if p else ["-", "-", "-"]
            rows.append(row)
        doc.table(headers, rows)
    for run in runs:
        doc.heading(f"{run['label']}", level=3)
        headers = ["task", "name", "track", "status", "vs eager", "L eager", "vs compile", "L compile", "own share",
                   "turns", "first correct", "plans", "stop", "tokens", "seconds"]  # fmt: skip
        rows = [
            [p["task_id"], p["name"], p["track"], p["status"], fmt(p["speedup_eager"]), fmt(p["lower_speedup_eager"]),
             fmt(p["speedup_compile"]), fmt(p["lower_speedup_compile"]), pct(p["own_kernel_share"]), p["coder_turns"],
             fmt(p["first_correct_turn"]), p["plans"], p["stop_reason"], p["tokens"], fmt(p["seconds"])]
            for p in run["problems"]
        ]  # fmt: skip
        doc.table(headers, rows)


def build_document(summary: dict[str, Any], plots: dict[str, str]) -> Document:
    labels = ", ".join(r["label"] for r in summary["runs"])
    doc = Document(title=f"Rollout report: {labels}")
    doc.para(f"Generated {summary['generated_at']} from {', '.join(r['dir'] for r in summary['runs'])}.")
    doc.para(DEFINITIONS)
    cols = _columns(summary)
    _overview(doc, cols)
    doc.heading("Plots")
    for name, caption in plots.items():
        doc.image(f"plots/{name}", caption)
    _failures(doc, cols)
    _stages(doc, cols)
    _problems(doc, summary)
    return doc


def build_report(paths: list[Path], out: Path, labels: list[str] | None = None) -> dict[str, Any]:
    """Write the report of ``paths`` into ``out``; returns the summary."""
    runs = load_runs(paths, labels)
    summary = summarize_runs(runs)
    out.mkdir(parents=True, exist_ok=True)
    series = [
        (f"{run.label} / {track}", [r for r in run.results if r.track == track])
        for run in runs
        for track in sorted({r.track for r in run.results})
    ]
    plots = write_plots(series, out / "plots")
    summary["plots"] = [f"plots/{name}" for name in plots]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    doc = build_document(summary, plots)
    (out / "report.md").write_text(doc.markdown())
    (out / "report.html").write_text(doc.html())
    return summary
