"""Nsight Compute's side of a kernel-metrics run: its options, its command line, and reading what it wrote.

The candidate runs under ``ncu`` only inside the sandbox's worker (``WorkerProcess(launcher=ncu_command(...))``):
the worker brackets one forward with cudaProfilerStart/Stop and ncu, started with profiling off, measures the
kernels of that range, at most ``max_kernels`` launches, each replayed as often as its metrics need. The host's
clocks are left alone (``--clock-control none``): locking them would change them for every other process on the
machine too.

What ncu writes is read as data, never trusted: its log lies where the candidate's process could write too, so
what it says (kernel names, numbers) is only shown to the agent, like the kernel names it names itself, and
never decides a Verdict or a reward. Everything here is pure: no process, no GPU.
"""

from __future__ import annotations

import csv
import math
import re
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubric_rl.sandbox.measure.profiling import Owner, kernel_owner

DURATION = "gpu__time_duration.sum"
DEFAULT_METRICS = [
    DURATION,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
]
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
_HEADER_START = '"ID","Process ID","Process Name","Host Name","Kernel Name"'
_COLUMNS = ("ID", "Kernel Name", "Block Size", "Grid Size", "Metric Name", "Metric Unit", "Metric Value")
_MICROSECONDS_PER = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
    "s": 1e6,
}
_ERROR_LINE = re.compile(r"^==ERROR==\s*(.*?)\s*$", re.MULTILINE)
_NO_KERNELS = re.compile(r"^==WARNING==\s*No kernels were profiled", re.MULTILINE)
_URL = re.compile(r"\s*\(?(?:see\s+)?https?://\S+")
MAX_NAME_CHARS = 300


class NcuOptions(BaseModel):
    """How a kernel-metrics run uses Nsight Compute."""

    model_config = ConfigDict(extra="forbid")

    metrics: list[str] = Field(
        default_factory=lambda: list(DEFAULT_METRICS),
        min_length=1,
        description="ncu metric names to collect per kernel launch (gpu__time_duration.sum becomes the duration).",
    )
    max_kernels: int = Field(
        default=40, ge=1, description="Kernel launches of the profiled forward that ncu measures (--launch-count)."
    )
    timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Limit on the whole run under ncu (worker start, trial, profiled forward); every kernel is "
        "replayed once per pass its metrics need, so it is far slower than an evaluation.",
    )
    executable: str | None = Field(default=None, description="The ncu binary; None: the one on PATH.")

    @field_validator("metrics")
    @classmethod
    def _plain_names(cls, metrics: list[str]) -> list[str]:
        for name in metrics:
            if not _METRIC_NAME.match(name):
                raise ValueError(f"metric {name!r}: only letters, digits, underscores and dots")
        return metrics


class KernelMetrics(BaseModel):
    """One kernel launch of the profiled forward, as ncu measured it."""

    name: str = Field(description="The demangled kernel name, cut to 300 characters.")
    owner: Owner
    block: str = Field(description="Block size as ncu writes it, e.g. '(256, 1, 1)'.")
    grid: str
    duration_us: float | None = Field(default=None, description="gpu__time_duration.sum, microseconds.")
    metrics: dict[str, float] = Field(
        default_factory=dict, description="The other metrics by name, in ncu's base units; unmeasured ones left out."
    )


class KernelMetricsReport(BaseModel):
    """What a kernel-metrics run found: its kernels, or why there are none (and possibly both)."""

    kernels: list[KernelMetrics] = Field(default_factory=list, description="In launch order.")
    error: str | None = None
    seconds: float = 0.0
    ncu: str | None = Field(default=None, description="The ncu executable used.")


def find_ncu(options: NcuOptions) -> str | None:
    """The ncu to run: the configured one or the one on PATH, if it is an executable file."""
    return shutil.which(options.executable or "ncu")


def ncu_command(executable: str, options: NcuOptions, log_path: Path) -> list[str]:
    """ncu's part of the worker's command line (the worker's own argv follows it)."""
    return [
        executable,
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--target-processes",
        "application-only",
        "--csv",
        "--print-units",
        "base",
        "--launch-count",
        str(options.max_kernels),
        "--metrics",
        ",".join(options.metrics),
        "--log-file",
        str(log_path),
    ]


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", "").strip())
    except ValueError:
        return None  # "n/a" and the like
    return value if math.isfinite(value) else None


def parse_ncu_log(text: str, own_kernels: set[str]) -> list[KernelMetrics]:
    """The launches of ncu's CSV details page (long form: a row per launch and metric), in launch order.

    Lines before the header (``==PROF==`` progress, anything the program printed) are skipped, columns are found
    by name, and rows that do not fit the header are ignored; no header: no launches."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(_HEADER_START)), None)
    if start is None:
        return []
    rows = csv.reader(lines[start:])
    header = next(rows)
    if any(name not in header for name in _COLUMNS):
        return []
    col = {name: header.index(name) for name in _COLUMNS}
    width = max(col.values()) + 1
    launches: dict[int, KernelMetrics] = {}
    for row in rows:
        if len(row) < width:
            continue
        try:
            launch = int(row[col["ID"]])
        except ValueError:
            continue
        kernel = launches.get(launch)
        if kernel is None:
            name = row[col["Kernel Name"]]
            kernel = launches[launch] = KernelMetrics(
                name=name[:MAX_NAME_CHARS],
                owner=kernel_owner(name, own_kernels),
                block=row[col["Block Size"]],
                grid=row[col["Grid Size"]],
            )
        metric, unit, value = row[col["Metric Name"]], row[col["Metric Unit"]], _number(row[col["Metric Value"]])
        if value is None:
            continue
        if metric == DURATION:
            scale = _MICROSECONDS_PER.get(unit.strip())
            if scale is not None:
                kernel.duration_us = value * scale
        else:
            kernel.metrics[metric] = value
    return [launches[i] for i in sorted(launches)]


def ncu_error(text: str) -> str | None:
    """ncu's own complaints in its log, as one sentence (None: it had none)."""
    errors = [e for e in _ERROR_LINE.findall(text) if e]
    if any("ERR_NVGPUCTRPERM" in e for e in errors):
        return (
            "ncu has no permission to read the GPU's performance counters on this host (ERR_NVGPUCTRPERM: "
            "profiling is restricted to administrators)"
        )
    if errors:
        digest = "; ".join(dict.fromkeys(_URL.sub("", e).strip() for e in errors))
        return f"ncu reported an error: {digest[:500]}"
    if _NO_KERNELS.search(text):
        return "ncu profiled no kernel (the profiled forward launched none that it could measure)"
    return None
