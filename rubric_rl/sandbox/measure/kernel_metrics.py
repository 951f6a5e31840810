"""Nsight Compute metrics of one candidate forward: the evaluation conversation once more, under ncu.

The candidate's code runs only in the sandbox's worker, so the worker is what runs under ``ncu``: a new one
(a warm worker was not started under ncu), with the same isolation and limits, holding the device as the
placement says (the executor gives it the whole GPU: ncu replays each kernel, and another process's kernels
beside it would disturb both its metrics and that process's timings). The run does what an evaluation does up to
the correctness trials, with one trial and no timing, then one warm-up forward and one forward ncu measures
(``Setup.ncu``). A report comes back for every call; it says why it holds no kernels when it holds none.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rubric_rl.sandbox.checks.static import check_program
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.ncu import (
    KernelMetricsReport,
    NcuOptions,
    find_ncu,
    ncu_command,
    ncu_error,
    parse_ncu_log,
)
from rubric_rl.sandbox.measure.reference_cache import reference_key
from rubric_rl.sandbox.run.conversation import Conversation
from rubric_rl.sandbox.run.placement import Placement
from rubric_rl.sandbox.run.process import WorkerProcess
from rubric_rl.sandbox.run.state import RunState
from rubric_rl.syntax import parse_python

if TYPE_CHECKING:
    from rubric_rl.sandbox.evaluate import Evaluator

log = logging.getLogger(__name__)

CPU_BACKEND = "Nsight Compute measures GPU kernels: the cpu backend has none"
NOT_INSTALLED = "ncu is not installed on the evaluation host"


def measure_kernel_metrics(
    evaluator: Evaluator,
    reference: str,
    candidate: str,
    options: NcuOptions | None = None,
    *,
    task_id: str | None = None,
    placement: Placement | None = None,
) -> KernelMetricsReport:
    """``candidate``'s kernels of one forward as Nsight Compute measured them, or why there are none."""
    options = options or NcuOptions()
    placement = placement or Placement()
    started = time.monotonic()
    if placement.worker is not None:
        placement.worker.close()  # not started under ncu

    def report(
        error: str | None, run: RunState | None = None, log_text: str = "", ncu: str | None = None
    ) -> KernelMetricsReport:
        kernels = parse_ncu_log(log_text, run.kernel_names) if run is not None else []
        return KernelMetricsReport(kernels=kernels, error=error, seconds=time.monotonic() - started, ncu=ncu)

    if evaluator.config.backend != "cuda":
        return report(CPU_BACKEND)
    executable = find_ncu(options)
    if executable is None:
        return report(NOT_INSTALLED)
    cfg = evaluator.config.updated(timing={"enabled": False}, correctness={"trials": 1, "extra_distributions": []})
    run = RunState(config=cfg, candidate=candidate, ncu=True)
    refused = _refused(run, reference)
    if refused is not None:
        return report(refused, ncu=executable)
    log_dir = Path(tempfile.mkdtemp(prefix="rubric-rl-ncu-"))
    try:
        os.chmod(log_dir, 0o700)
        log_path = log_dir / "ncu.csv"
        _converse(evaluator, run, reference, placement, ncu_command(executable, options, log_path), options)
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    result = report(_run_failure(run, log_text) or ncu_error(log_text), run, log_text, executable)
    if result.error is None and not result.kernels:
        result.error = "no kernels were recorded"
    log.info(
        "kernel metrics of a candidate for task %s: %d kernels in %.1f s%s",
        task_id,
        len(result.kernels),
        result.seconds,
        f" ({result.error})" if result.error else "",
    )
    return result


def _refused(run: RunState, reference: str) -> str | None:
    """The static checks an evaluation runs first: why the program is not run at all, or None."""
    try:
        parse_python(run.candidate)
    except SyntaxError as e:
        return f"the program does not parse (candidate line {e.lineno}: SyntaxError: {e.msg})"
    run.findings.extend(check_program(run.candidate, run.config, reference))
    hacks = [f for f in run.findings if f.severity == "error"]
    if hacks and run.config.policy.stop_on_static_error:
        return f"the program breaks an evaluation rule ({hacks[0].rule}: {hacks[0].message})"
    return None


def _converse(
    evaluator: Evaluator,
    run: RunState,
    reference: str,
    placement: Placement,
    launcher: list[str],
    options: NcuOptions,
) -> None:
    """The worker's conversation under ``launcher``, as ``Evaluator.evaluate`` holds it (builds, reference cache)."""
    cfg: SandboxConfig = run.config
    if cfg.correctness.reference_cache_mb > 0:
        import torch

        run.reference_key = reference_key(
            reference, cfg, f"torch {torch.__version__}, {placement.cuda_visible_devices}"
        )
        run.known_reference = evaluator.reference_cache.get(run.reference_key)
    worker = WorkerProcess(cfg, cuda_visible_devices=placement.cuda_visible_devices, launcher=launcher)
    placed = replace(placement, worker=None, run_timeout_s=options.timeout_s)
    with ThreadPoolExecutor(1, thread_name_prefix="compare") as compare:
        try:
            Conversation(run, placed, evaluator.builder, evaluator.reference_cache, compare).converse(reference, worker)
        finally:
            run.compared()


def _run_failure(run: RunState, log_text: str) -> str | None:
    """How the run under ncu failed, in the order a Verdict's status says it (None: it did not)."""
    first = f": {run.errors[0]}" if run.errors else ""
    if run.infra_error:
        said = ncu_error(log_text)
        return f"the run under ncu failed in the evaluator: {run.infra_error}" + (f" ({said})" if said else "")
    hacks = [f for f in run.findings if f.severity == "error"]
    if hacks:
        return f"the program breaks an evaluation rule ({hacks[0].rule}: {hacks[0].message})"
    if run.compile_failed:
        return "the program did not compile" + first
    if run.timed_out:
        return "the run under ncu timed out" + first
    if run.runtime_failed:
        return "the program failed at run time" + first
    return None
