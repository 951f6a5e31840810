"""Reports on rollout runs: KernelBench's metrics (correctness, fast_p against eager and torch.compile, geometric
means), a noise-aware fast_p, failures and hacks, time per stage; JSON, Markdown, HTML and PNG plots; wandb."""

from rubric_rl.reports.metrics import P_VALUES, lower_speedup, run_metrics
from rubric_rl.reports.report import build_report

__all__ = ["P_VALUES", "build_report", "lower_speedup", "run_metrics"]
