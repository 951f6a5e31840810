"""Evaluation executors: ``local`` (this machine) and ``ray`` (a cluster), one interface."""

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.executors.base import Executor, ExecutorConfig, infra_verdict


def make_executor(sandbox: SandboxConfig, config: ExecutorConfig) -> Executor:
    if config.kind == "local":
        from rubric_rl.sandbox.executors.local import LocalExecutor

        return LocalExecutor(sandbox, config)
    if config.kind == "ray":
        from rubric_rl.sandbox.executors.ray_executor import RayExecutor

        return RayExecutor(sandbox, config)
    raise ValueError(f"executor kind {config.kind!r}: expected 'local' or 'ray'")


__all__ = ["Executor", "ExecutorConfig", "infra_verdict", "make_executor"]
