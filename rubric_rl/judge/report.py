"""Rich rendering of a Judgment for a terminal (the ``rubric-rl judge`` command)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rubric_rl.judge.record import Judgment


def judgment_panel(judgment: Judgment, title: str | None = None) -> Panel:
    j, ident = judgment, judgment.identity
    scores = Table(show_lines=True, expand=True)
    scores.add_column("dimension", style="bold", no_wrap=True)
    scores.add_column("score", justify="right", no_wrap=True)
    scores.add_column("weight", justify="right", no_wrap=True)
    scores.add_column("rationale", ratio=1)
    weight = sum(d.weight for d in j.dimensions) or 1.0
    for d in j.dimensions:
        samples = f" {d.sample_scores}" if len(d.sample_scores) > 1 else ""
        scores.add_row(d.name, f"{d.score:.2f} / {d.max_score}{samples}", f"{d.weight / weight:.2f}", Text(d.rationale))

    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold", no_wrap=True)
    summary.add_column()
    style = "bold red" if j.judge_failed else "bold green"
    total = f"{j.total:.3f}" + (f" (before gates {j.raw_total:.3f})" if j.total != j.raw_total else "")
    summary.add_row("total", Text(total, style=style))
    fired = [g for g in j.gates if g.fired]
    summary.add_row(
        "gates fired",
        Text("; ".join(f"{g.name} [{g.effect}]: {', '.join(g.reasons)}" for g in fired), style="red")
        if fired
        else Text("none"),
    )
    summary.add_row("judge", Text(ident.label, style="yellow" if ident.kind == "heuristic" else ""))
    summary.add_row("rubric", f"{ident.rubric} v{ident.rubric_version} ({ident.rubric_hash[:12]})")
    ok = sum(s.ok for s in j.samples)
    summary.add_row("samples", f"{ok}/{len(j.samples)} ok" + (" (cache hit)" if j.cache_hit else ""))
    if j.usage.total_tokens:
        summary.add_row("tokens", f"{j.usage.prompt_tokens} prompt + {j.usage.completion_tokens} completion")
    summary.add_row("latency", f"{j.latency_s:.3f} s")
    parts: list[RenderableType] = [scores, summary]
    if j.judge_failed:
        parts.append(Text(f"judge_failed: {j.failure}", style="bold red"))
    if j.notes:
        parts.append(Text("\n".join(f"note: {n}" for n in j.notes), style="dim"))
    return Panel(Group(*parts), title=title or "Judgment")
