"""Timing protocol: eager, torch.compile and the candidate, interleaved, on fresh inputs, in one worker.

Each round draws fresh inputs from the task's ``get_inputs()`` (a result cache keyed on pointers or content
never hits), gives each model its own copy (the round's last model the draw itself), and times the models in
an order that rotates between rounds, so
drift and order effects fall on all of them alike. Around every timed call: the cache is flushed (GPU: a
buffer of twice the L2 is overwritten), the device is synchronised as a whole, the host clock is read, the
call runs, the device is synchronised as a whole again (work the candidate put on other streams counts) and
the clock is read. The outputs of a round stay alive until every model of the round has run, so no model is
handed another's freed results, and are poisoned before they are freed. Some rounds, chosen at random, send
the candidate's and eager's outputs to the evaluator for comparison: a candidate that is only correct while
it is being checked fails there.

Verdicts keep every round's times. A speedup is the ratio of the two medians. ``paired_ratio``, the median of
per-round ratios, cancels what slows a whole round (GPU clocks, host load on a launch-bound program) but not
each model's own noise; measured beside it, it did not lower the CV (an H100, 4 KernelBench candidates x 5
evaluations: within 0.07 points of the ratio of medians; 2 CPU cores: 6.05% against 5.12%), so the benchmarks
report it as a check and Verdicts keep the ratio of medians.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from rubric_rl.sandbox.verdict import TimingStats


def choose_checked_rounds(n_rounds: int, n_checked: int, seed: int) -> set[int]:
    if n_checked <= 0 or n_rounds <= 0:
        return set()
    rng = random.Random(seed)
    picks = set(rng.sample(range(n_rounds), min(n_checked, n_rounds)))
    picks.add(n_rounds - 1)  # the last round too: a candidate that degrades late is caught
    return picks


def run_rounds(
    models: dict[str, Callable[..., Any]],
    *,
    make_inputs: Callable[[int], list[Any]],
    clone: Callable[[list[Any]], list[Any]],
    backend: Any,
    n_rounds: int,
    n_warmup: int,
    checked_rounds: set[int],
    on_checked_round: Callable[[int, dict[str, Any]], None],
    after_round: Callable[[dict[str, Any]], None],
) -> dict[str, list[float]]:
    """Time every model ``n_rounds`` times, interleaved round by round on the same draw; returns milliseconds per
    model. Runs inside the worker. (Rounds spanning a minimum wall time, against the host's slow and quick
    spells, did not lower the speedup's spread on an H100 host: docs/measurements.md.)"""
    names = list(models)
    warm = make_inputs(-1)
    for name in names:
        for _ in range(n_warmup):
            out = models[name](*clone(warm))
            backend.synchronize()
            after_round({name: out})
    del warm
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(n_rounds):
        inputs = make_inputs(r)
        order = names[r % len(names) :] + names[: r % len(names)]
        outputs: dict[str, Any] = {}
        for name in order:
            # Each model has its own copy; the round's last takes the draw itself, which nothing reads after it
            # (a 6 GB copy fewer per round of KernelBench L1-19, 3 ms of each round's 20 on the H200).
            x = inputs if name == order[-1] else clone(inputs)
            backend.flush_cache()
            backend.synchronize()
            t0 = backend.now_ns()
            outputs[name] = models[name](*x)
            backend.synchronize()
            times[name].append(round((backend.now_ns() - t0) / 1e6, 4))  # 0.1 us: verdicts keep every round
            del x
        if r in checked_rounds:
            on_checked_round(r, outputs)
        after_round(outputs)
        del outputs, inputs
    return times


def host_probe(backend: Any, device: Any, *, n_ops: int = 256, n_steps: int = 20_000) -> dict[str, float]:
    """The host's speed where the rounds run: microseconds per tiny op dispatched to ``device`` (one element added
    ``n_ops`` times, then the device synchronised: the launch rate a launch-bound program runs at) and per step of
    a fixed pure-Python loop (the interpreter on this core). Runs inside the worker, beside the rounds.

    A launch-bound program's time is the host's, and so is its speedup when the candidate launches far fewer
    kernels: KernelBench L3-34 (eager launches about a thousand tiny kernels a call, its candidate 258) measured
    speedups of 14.1-14.8 and then 16.6-17.1 inside one process on an H100, as eager went from 16.5 to 25 ms and
    the candidate from 1.15 to 1.5 ms together. Verdicts carry the probe so that such drift is seen, not guessed.
    """
    import torch

    x = torch.zeros(1, device=device)
    backend.synchronize()
    t0 = backend.now_ns()
    for _ in range(n_ops):
        x.add_(1.0)
    backend.synchronize()
    launch_us = (backend.now_ns() - t0) / 1e3 / n_ops
    t0 = time.perf_counter_ns()
    acc = 0
    for i in range(n_steps):
        acc += i & 7
    python_us = (time.perf_counter_ns() - t0) / 1e3 / n_steps
    return {"launch_us": round(launch_us, 4), "python_us": round(python_us, 5)}


def paired_ratio(numerator_ms: list[float], denominator_ms: list[float]) -> float | None:
    """Median over rounds of ``numerator_ms[r] / denominator_ms[r]``; both lists hold one time per round, in round
    order (``run_rounds``). None when no round has a positive denominator."""
    if len(numerator_ms) != len(denominator_ms):
        raise ValueError(f"paired timings need one time per round each ({len(numerator_ms)} vs {len(denominator_ms)})")
    ratios = [a / b for a, b in zip(numerator_ms, denominator_ms, strict=True) if b > 0]
    return statistics.median(ratios) if ratios else None


def summarize(ms: list[float]) -> TimingStats:
    qs = statistics.quantiles(ms, n=10) if len(ms) >= 2 else [ms[0]] * 9
    return TimingStats(
        n=len(ms),
        median_ms=statistics.median(ms),
        mean_ms=statistics.fmean(ms),
        std_ms=statistics.pstdev(ms) if len(ms) > 1 else 0.0,
        min_ms=min(ms),
        max_ms=max(ms),
        p10_ms=qs[0],
        p90_ms=qs[-1],
    )
