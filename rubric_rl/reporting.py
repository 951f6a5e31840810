"""Rich renderings of the records people read in a terminal: Verdicts, task lists, batch summaries."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rubric_rl.sandbox.verdict import TimingStats, Verdict
from rubric_rl.tasks.task import Task

STATUS_STYLE = {
    "correct": "bold green",
    "incorrect": "bold yellow",
    "compile_error": "bold red",
    "runtime_error": "bold red",
    "timeout": "bold magenta",
    "hack": "bold white on red",
}


def _ms(stats: TimingStats | None) -> str:
    if stats is None:
        return "-"
    return f"{stats.median_ms:.4g} ms (±{100 * stats.cv:.1f}%, n={stats.n})"


def verdict_panel(verdict: Verdict, title: str | None = None) -> Panel:
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row("status", Text(verdict.status, style=STATUS_STYLE[verdict.status]))
    if verdict.task_id:
        summary.add_row("task", verdict.task_id)
    summary.add_row("candidate", verdict.candidate_sha256[:16])
    if verdict.environment:
        env = verdict.environment
        summary.add_row("device", f"{env.backend}: {env.device}" + (f" (sm {env.arch})" if env.arch else ""))
    passed = sum(t.passed for t in verdict.trials)
    if verdict.trials:
        worst = max((t.max_abs_error or 0.0) for t in verdict.trials)
        summary.add_row("trials", f"{passed}/{len(verdict.trials)} passed, max abs error {worst:.3g}")
    t = verdict.timings
    if t is not None:
        summary.add_row("candidate", _ms(t.candidate))
        summary.add_row("eager", _ms(t.eager))
        summary.add_row("compile", _ms(t.compile) + (f" [{t.compile_mode}, {t.baseline_source}]" if t.compile else ""))
    if verdict.speedup_eager is not None:
        summary.add_row("speedup vs eager", f"{verdict.speedup_eager:.3f}x")
    if verdict.speedup_compile is not None:
        summary.add_row("speedup vs compile", f"{verdict.speedup_compile:.3f}x")
    if verdict.own_kernel_time_share is not None:
        summary.add_row("own kernel share", f"{100 * verdict.own_kernel_time_share:.1f}% of GPU time")
    for b in verdict.builds:
        summary.add_row(
            "build",
            f"{b.name}: {'ok' if b.ok else 'failed'}, {b.seconds:.1f} s"
            + (" (cached)" if b.cached else "")
            + (" [split]" if b.split_sources else ""),
        )
    d = verdict.durations
    summary.add_row(
        "stages",
        f"static {d.static_s:.2f}s, build {d.build_s:.1f}s, load {d.load_s:.2f}s, "
        f"correctness {d.correctness_s:.2f}s, timing {d.timing_s:.2f}s, total {d.total_s:.1f}s",
    )
    parts: list = [summary]
    if verdict.errors:
        parts.append(Text("\n".join(verdict.errors), style="red"))
    if verdict.findings:
        ft = Table(title="findings", show_lines=False)
        for col in ("rule", "severity", "line", "message"):
            ft.add_column(col)
        for f in verdict.findings:
            ft.add_row(
                f.rule, f.severity, str(f.line or ""), f.message + (f"\n[dim]{f.evidence}[/]" if f.evidence else "")
            )
        parts.append(ft)
    if verdict.task_flags:
        parts.append(Text("task: " + "; ".join(verdict.task_flags), style="yellow"))
    return Panel(Group(*parts), title=title or "Verdict")


def tasks_table(tasks: Iterable[Task]) -> Table:
    table = Table(title="tasks")
    for col in ("id", "level", "problem", "name", "lines"):
        table.add_column(col)
    for t in tasks:
        table.add_row(t.id, str(t.level), str(t.problem_id), t.name, str(t.code.count("\n") + 1))
    return table


def print_json(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def batch_table(summary: dict, verdicts_path) -> Table:
    """The compact table printed last by verify-batch: one row per candidate, then the totals."""
    from rubric_rl.batch import BatchRecord

    table = Table(title=f"{summary['candidates']} candidates ({summary['evaluated_now']} evaluated now)")
    table.add_column("candidate", overflow="fold", min_width=24)
    for col in ("task", "status", "speedup eager", "speedup compile", "rubric"):
        table.add_column(col)
    for line in open(verdicts_path).read().splitlines():
        r = BatchRecord.model_validate_json(line)
        v = r.verdict
        judgment = r.extras.get("judgment") or {}
        rubric = f"{judgment['total']:.2f}" if "total" in judgment else "-"
        table.add_row(
            r.candidate_id,
            r.task_id,
            Text(v.status, style=STATUS_STYLE[v.status]),
            f"{v.speedup_eager:.2f}x" if v.speedup_eager else "-",
            f"{v.speedup_compile:.2f}x" if v.speedup_compile else "-",
            rubric,
        )
    status = ", ".join(f"{k} {n}" for k, n in summary["status"].items())
    geo = summary.get("geomean_speedup_eager")
    table.caption = (
        f"{status} | correct {100 * summary['correct_rate']:.0f}% | geomean speedup vs eager {geo:.2f}x | "
        if geo
        else f"{status} | "
    ) + f"{summary['elapsed_s']:.0f} s"
    return table
