"""The reward's long-lived parts, built once per process and config: the executor (this node's evaluation
service, or one in this process), the judge, the group board and the ledger writer.

Under Ray (verl's reward-loop workers) the executor is the node's named evaluation service and the board one
named actor for the run (group means and training metrics); elsewhere both live in this process. With no
configuration at all the defaults apply: the cpu backend where no GPU is visible, the offline judge where no
endpoint is configured, the default RewardConfig.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Literal

from rubric_rl.judge import make_judge
from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.groups import GroupBoard
from rubric_rl.reward.ledger import LedgerWriter, ledger_dir
from rubric_rl.reward.metrics import JsonlSink, MetricsSink, RewardMetrics, WandbSink
from rubric_rl.reward.scorer import Board, RewardScorer
from rubric_rl.sandbox.executors import Executor

log = logging.getLogger(__name__)

BOARD_NAME = "rubric_rl.reward_board"
_lock = threading.Lock()
_runtimes: dict[str, RewardScorer] = {}


def resolve_backend(config: RewardConfig) -> Literal["cpu", "cuda"]:
    if config.backend != "auto":
        return config.backend
    import torch

    return "cuda" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "cpu"


def use_ray(config: RewardConfig) -> bool:
    if config.service.mode != "auto":
        return config.service.mode == "ray"
    try:
        import ray
    except ImportError:
        return False
    return bool(ray.is_initialized())


def metrics_sinks(config: RewardConfig) -> list[MetricsSink]:
    sinks: list[MetricsSink] = []
    run_dir = config.ledger.dir
    if run_dir is not None:
        sinks.append(JsonlSink(ledger_dir(run_dir) / "metrics.jsonl"))
    m = config.metrics
    if m.wandb:
        sinks.append(WandbSink(m.wandb_project, m.wandb_group, m.wandb_mode, run_dir, config.model_dump(mode="json")))
    return sinks


class _BoardActor(GroupBoard):
    """The board of a run, as a named Ray actor; its metrics sinks are made where it runs."""

    def __init__(self, config: dict[str, Any]) -> None:
        cfg = RewardConfig.model_validate(config)
        super().__init__(RewardMetrics(cfg.metrics.window, metrics_sinks(cfg)))


class RemoteBoard:
    """A client of the run's board actor (started by the first worker that needs it). If the board is lost, a
    sample is settled here as if it had no group (its own score, or the fallback), never lost."""

    def __init__(self, config: RewardConfig) -> None:
        self.config = config
        self.actor: Any = self._connect()

    def _connect(self) -> Any:
        import ray

        return (
            ray.remote(_BoardActor)
            .options(
                name=BOARD_NAME,
                namespace=self.config.service.namespace,
                get_if_exists=True,
                lifetime="detached" if self.config.service.lifetime == "detached" else None,
                num_cpus=0,
                max_concurrency=100_000,
            )
            .remote(self.config.model_dump(mode="json"))
        )

    async def settle(
        self, group_id: str, size: int, sample_id: str, own_score: float | None, wait_s: float, fallback: float
    ) -> tuple[float, list[str]]:
        import ray

        try:
            score, peers = await self.actor.settle.remote(group_id, size, sample_id, own_score, wait_s, fallback)
        except ray.exceptions.RayActorError as e:
            log.warning("reward board lost (%s): sample %s settled without its group", type(e).__name__, sample_id)
            self.actor = self._connect()
            return (own_score if own_score is not None else fallback), []
        return float(score), list(peers)

    async def observe(self, row: dict[str, object]) -> None:
        import ray

        try:
            await self.actor.observe.remote(row)
        except ray.exceptions.RayActorError:
            self.actor = self._connect()  # one window's metrics are lost; the ledger has the record


def make_executor_for(config: RewardConfig, backend: Literal["cpu", "cuda"], ray_service: bool) -> Executor:
    sandbox = config.sandbox_config(backend)
    executor = config.executor_config()
    if ray_service:
        from rubric_rl.sandbox.executors.service import ServiceExecutor

        s = config.service
        return ServiceExecutor(
            sandbox, executor, name=s.name, namespace=s.namespace, lifetime=s.lifetime, max_inflight=s.max_inflight
        )
    from rubric_rl.sandbox.executors.service import ThreadedExecutor

    return ThreadedExecutor(sandbox, executor)


def build_scorer(config: RewardConfig) -> RewardScorer:
    backend = resolve_backend(config)
    ray_service = use_ray(config)
    executor = make_executor_for(config, backend, ray_service)
    judge = make_judge(config.judge) if config.mix.uses_judge else None
    board: Board = (
        RemoteBoard(config) if ray_service else GroupBoard(RewardMetrics(config.metrics.window, metrics_sinks(config)))
    )
    ledger = LedgerWriter(config.ledger.dir, config) if config.ledger.dir is not None else None
    log.info(
        "reward: %s/%s mix, backend %s, executor %s, judge %s, ledger %s",
        config.rule.name,
        config.mix.name,
        backend,
        type(executor).__name__,
        judge.identity.label if judge is not None else "none",
        ledger.path if ledger is not None else "off",
    )
    return RewardScorer(config, executor, judge, board=board, ledger=ledger, backend=backend)


def get_scorer(config: RewardConfig) -> RewardScorer:
    """This process's scorer for ``config`` (built on first use)."""
    key = config.model_dump_json()
    with _lock:
        scorer = _runtimes.get(key)
        if scorer is None:
            scorer = _runtimes[key] = build_scorer(config)
        return scorer


def ledger_path(config: RewardConfig) -> Path | None:
    return ledger_dir(config.ledger.dir) if config.ledger.dir is not None else None
