"""The report's PNG plots (matplotlib, Agg): speedup distribution, fast_p curves, turns to first correct.

Each series is one run and policy track (``label / track``); every plot holds all the runs of a report, so a base
model and a trained one are compared on one picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rubric_rl.reports.metrics import lower_speedup, speedup

Series = tuple[str, list[Any]]  # (name, TaskResults)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def speedup_distribution(series: list[Series], path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, against in zip(axes, ("eager", "compile"), strict=True):
        values = [[s for r in results if (s := speedup(r.verdict, against))] for _, results in series]
        finite = [v for vs in values for v in vs]
        lo, hi = (min(finite), max(finite)) if finite else (0.5, 2.0)
        bins = np.geomspace(min(lo, 0.5) * 0.9, max(hi, 2.0) * 1.1, 25)
        for (name, _), vs in zip(series, values, strict=True):
            if vs:
                ax.hist(vs, bins=bins, histtype="step", linewidth=2, label=f"{name} (n={len(vs)})")
        ax.axvline(1.0, color="grey", linestyle=":")
        ax.set_xscale("log")
        ax.set_xlabel(f"speedup over {'torch.compile' if against == 'compile' else 'eager'} (correct programs)")
        ax.set_title(f"against {against}")
        if any(values):
            ax.legend(fontsize=8)
    axes[0].set_ylabel("programs")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fast_p_curves(series: list[Series], path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    top = max(
        [2.5]
        + [s for _, results in series for r in results for a in ("eager", "compile") if (s := speedup(r.verdict, a))]
    )
    ps = np.linspace(0.0, min(top * 1.05, 20.0), 200)
    for ax, against in zip(axes, ("eager", "compile"), strict=True):
        for i, (name, results) in enumerate(series):
            n = len(results) or 1
            plain = [speedup(r.verdict, against) for r in results]
            lower = [lower_speedup(r.verdict, against) for r in results]
            color = f"C{i % 10}"
            ax.plot(ps, [sum(s is not None and s > p for s in plain) / n for p in ps], color=color, label=name)
            ax.plot(ps, [sum(s is not None and s > p for s in lower) / n for p in ps], color=color, linestyle="--")
        ax.axvline(1.0, color="grey", linestyle=":")
        ax.set_xlabel("p (speedup threshold)")
        ax.set_title(f"fast_p against {against} (dashed: noise-aware)")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("fraction of tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def turns_to_first_correct(series: list[Series], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    most = max([1] + [r.coder_turns for _, results in series for r in results])
    labels = [str(k) for k in range(1, most + 1)] + ["never"]
    width = 0.8 / max(1, len(series))
    for i, (name, results) in enumerate(series):
        counts = [sum(r.first_correct_turn == k for r in results) for k in range(1, most + 1)]
        counts.append(sum(r.first_correct_turn is None for r in results))
        ax.bar(np.arange(len(labels)) + i * width, counts, width=width, label=name)
    ax.set_xticks(np.arange(len(labels)) + width * (len(series) - 1) / 2, labels)
    ax.set_xlabel("coder turn of the first correct program")
    ax.set_ylabel("tasks")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


PLOTS = {
    "speedup_distribution.png": (speedup_distribution, "Speedup distribution of correct programs"),
    "fast_p.png": (fast_p_curves, "fast_p curves against eager and torch.compile"),
    "turns_to_first_correct.png": (turns_to_first_correct, "Coder turns to the first correct program"),
}


def write_plots(series: list[Series], folder: Path) -> dict[str, str]:
    """Every plot into ``folder``; {file name: caption}."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (draw, _) in PLOTS.items():
        draw(series, folder / name)
    return {name: caption for name, (_, caption) in PLOTS.items()}
