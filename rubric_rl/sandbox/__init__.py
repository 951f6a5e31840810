"""Verifiable evaluation of one candidate: static checks, owned builds, isolated execution, correctness,
runtime guards, timing against eager and torch.compile, profiling; the result is a Verdict."""

from rubric_rl.sandbox.config import HackPolicy, SandboxConfig, Tolerance
from rubric_rl.sandbox.evaluate import Evaluator, evaluate
from rubric_rl.sandbox.measure.baseline import TaskBaseline, measure_baseline
from rubric_rl.sandbox.measure.ncu import KernelMetrics, KernelMetricsReport, NcuOptions
from rubric_rl.sandbox.run.placement import Placement
from rubric_rl.sandbox.verdict import Finding, Status, TimingStats, TrialResult, Verdict

__all__ = [
    "Evaluator",
    "Finding",
    "HackPolicy",
    "KernelMetrics",
    "KernelMetricsReport",
    "NcuOptions",
    "Placement",
    "SandboxConfig",
    "Status",
    "TaskBaseline",
    "TimingStats",
    "Tolerance",
    "TrialResult",
    "Verdict",
    "evaluate",
    "measure_baseline",
]
