"""The host's speed under the timing cores, over time: how long its slow spells last, and whether workers starting
on the other cores bring them.

    python scripts/bench_host.py [--device cuda|cpu] [--seconds 60] [--interval 0.1] [--pin 14,15]
        [--load-cpus 0-13] [--out runs/bench_host.json]

On an H100 host, KernelBench L3-34 (launch-bound on both sides) measured speedups of 14.7-16.8 over five
evaluations, following the host probe each Verdict carries (Pearson r 0.77-0.99 between speedup and the probe's
launch time, whose CV over the evaluations was 15-18%). In the slowest evaluation a fixed Python loop ran at half
speed (0.076 against 0.035-0.038 us a step): the host itself, not the GPU. A spell shorter than an evaluation could
be waited out before timing; one as long as a batch cannot. This measures the spells: ``timing.host_probe`` every
``--interval`` seconds on the timing cores, first quiet, then while worker-like processes start one after another on
the other cores (Python, ``import torch``, a tensor on the device: what the executor's spare workers do beside a
timing). A probe is slow when its Python loop takes more than ``--slow`` times the quiet phase's median.

Defaults: the cores the executor would reserve for device 0's timings (``cpu_cores.plan_cores``) and the rest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchlib import fmt, print_table, write_json

_WORKER_START = "import torch; torch.zeros(1, device={device!r}).add_(1).sum().item()"


def spells(samples: list[tuple[float, float]], threshold: float, interval: float) -> list[float]:
    """Seconds each run of consecutive samples above ``threshold`` lasted: (time, value) samples in time order,
    a run counted from its first sample to its last plus one ``interval``."""
    runs: list[float] = []
    start: float | None = None
    last = 0.0
    for t, value in samples:
        if value > threshold:
            start = t if start is None else start
            last = t
        elif start is not None:
            runs.append(last - start + interval)
            start = None
    if start is not None:
        runs.append(last - start + interval)
    return runs


def phase_summary(probes: list[dict], slow_python_us: float, interval: float) -> dict:
    """Launch and Python times of one phase's probes (median, p90, max), the share of slow probes and the spells."""

    def stats(key: str) -> dict:
        values = sorted(p[key] for p in probes)
        return {
            "median": statistics.median(values),
            "p90": values[min(len(values) - 1, int(0.9 * len(values)))],
            "max": values[-1],
        }

    runs = spells([(p["t"], p["python_us"]) for p in probes], slow_python_us, interval)
    return {
        "probes": len(probes),
        "launch_us": stats("launch_us"),
        "python_us": stats("python_us"),
        "slow_share": sum(p["python_us"] > slow_python_us for p in probes) / len(probes),
        "spells": len(runs),
        "longest_spell_s": max(runs, default=0.0),
        "spells_s": [round(r, 3) for r in runs],
    }


def _cpu_list(text: str) -> set[int]:
    from rubric_rl.sandbox.run.cpu_cores import parse_cpu_list

    cpus = parse_cpu_list(text)
    if not cpus:
        raise SystemExit(f"{text!r}: no CPUs")
    return set(cpus)


def _starter(device: str, cpus: set[int] | None, stop: threading.Event, started: list[float]) -> None:
    """Start worker-like processes one after another until ``stop``; each one's start time goes into ``started``."""
    code = _WORKER_START.format(device=device)
    while not stop.is_set():
        started.append(time.monotonic())
        subprocess.run(
            [sys.executable, "-c", code],
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def _probe_for(seconds: float, interval: float, backend, device, origin: float) -> list[dict]:
    from rubric_rl.sandbox.measure.timing import host_probe

    probes = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        probes.append({"t": round(t - origin, 4), **host_probe(backend, device)})
        time.sleep(max(0.0, interval - (time.monotonic() - t)))
    return probes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--seconds", type=float, default=60.0, help="of the two phases together")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between probes")
    ap.add_argument("--slow", type=float, default=1.25, help="slow: this many times the quiet median Python step")
    ap.add_argument("--pin", default=None, help="CPUs to probe on (default: the executor's timing cores)")
    ap.add_argument("--load-cpus", default=None, help="CPUs the starting workers run on (default: the others)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_host.json"))
    args = ap.parse_args()
    if args.seconds <= 0 or args.interval <= 0 or args.slow <= 1:
        raise SystemExit("--seconds and --interval must be positive, --slow above 1")

    from rubric_rl.sandbox.backends import make_backend
    from rubric_rl.sandbox.run.cpu_cores import available_cores, plan_cores

    plan = plan_cores(["0"], 2) if args.device == "cuda" else plan_cores([], 0)
    pin = _cpu_list(args.pin) if args.pin else set(plan.timing.get("0", ()))
    load = _cpu_list(args.load_cpus) if args.load_cpus else (set(plan.general) if pin else None)
    if pin:
        try:
            os.sched_setaffinity(0, pin)
        except OSError as e:
            raise SystemExit(f"--pin {sorted(pin)}: {e}") from None
    backend = make_backend(args.device)
    device = backend.device
    origin = time.monotonic()
    _probe_for(min(1.0, args.seconds / 10), args.interval, backend, device, origin)  # the device's first launches
    half = args.seconds / 2
    quiet = _probe_for(half, args.interval, backend, device, origin)
    stop, started = threading.Event(), []
    starter = threading.Thread(target=_starter, args=(args.device, load, stop, started), daemon=True)
    starter.start()
    busy = _probe_for(half, args.interval, backend, device, origin)
    stop.set()
    starter.join()

    slow_python_us = args.slow * statistics.median(p["python_us"] for p in quiet)
    phases = {
        "quiet": phase_summary(quiet, slow_python_us, args.interval),
        "workers_starting": phase_summary(busy, slow_python_us, args.interval),
    }
    phases["workers_starting"]["workers_started"] = len(started)
    report = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "pinned": sorted(pin),
        "load_cpus": sorted(load) if load else sorted(available_cores()),
        "slow_python_us": slow_python_us,
        "phases": phases,
        "probes": {"quiet": quiet, "workers_starting": busy},
    }
    write_json(args.out, report)
    rows = [
        [
            name,
            str(s["probes"]),
            f"{fmt(s['launch_us']['median'])} / {fmt(s['launch_us']['p90'])} / {fmt(s['launch_us']['max'])}",
            f"{fmt(s['python_us']['median'], '.4f')} / {fmt(s['python_us']['max'], '.4f')}",
            fmt(100 * s["slow_share"], ".1f"),
            str(s["spells"]),
            fmt(s["longest_spell_s"], ".1f"),
        ]
        for name, s in phases.items()
    ]
    print_table(
        f"host probe every {args.interval} s on CPUs {sorted(pin) or 'all'} ({args.device}); slow: Python step > "
        f"{slow_python_us:.4f} us",
        [
            "phase",
            "probes",
            "launch us (median / p90 / max)",
            "Python us (median / max)",
            "slow %",
            "spells",
            "longest spell s",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
