"""Masked samples and their GRPO group: a masked sample is given the mean of its group's unmasked scores.

Why the mean: verl 0.9.1 has no per-sample mask or weight a reward can set. Its GRPO advantage
(``trainer/ppo/core_algos.py::compute_grpo_outcome_advantage``) is ``(score - mean(group)) / (std(group) + eps)``
over every score of the prompt's group (``uid``), then multiplied by the response mask; a score of 0 for a lost
GPU would move the mean and push the group's honest samples up or down. Given the mean of the others, the
masked sample's advantage is exactly 0 (no gradient from it) and the group mean is unchanged; only the std is
taken over one more sample (the others' advantages grow by sqrt((n-1)/(m-1)) for m unmasked of n; with
``norm_adv_by_std_in_grpo=False`` they are unchanged).

Samples of one group are scored concurrently, in several reward workers: every sample reports its own score
to a ``GroupBoard`` (in this process, or one named Ray actor for the cluster) and a masked sample waits there
for the rest of its group. No sample waits for a masked one, so a group always completes; a group that never
completes (a member scored elsewhere) is settled with the scores present after ``wait_s``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rubric_rl.reward.metrics import MetricsSink, RewardMetrics


def group_mean(scores: Sequence[float], fallback: float) -> float:
    """The mean of a group's unmasked scores (``fallback`` when there are none)."""
    return math.fsum(scores) / len(scores) if scores else fallback


@dataclass
class _Group:
    size: int
    scores: dict[str, float | None] = field(default_factory=dict)
    complete: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0
    created: float = field(default_factory=time.monotonic)


class GroupBoard:
    """Own scores per group; masked samples wait for their group here. Also the place training-time metrics
    are aggregated (one per cluster, so one wandb run)."""

    def __init__(self, metrics: RewardMetrics | None = None, stale_s: float = 7200.0) -> None:
        self._groups: dict[str, _Group] = {}
        self.metrics = metrics
        self.stale_s = stale_s
        self.settled = 0
        self.timeouts = 0

    async def settle(
        self,
        group_id: str,
        size: int,
        sample_id: str,
        own_score: float | None,
        wait_s: float,
        fallback: float,
    ) -> tuple[float, list[str]]:
        """Report a sample's own score (None: masked). Unmasked: returns it at once. Masked: waits until the
        group has ``size`` reports (or ``wait_s``), then returns the mean of the unmasked ones and their ids."""
        self._evict()
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _Group(size=size)
        group.scores[sample_id] = own_score
        if len(group.scores) >= group.size:
            group.complete.set()
        try:
            if own_score is not None:
                return own_score, []
            group.waiting += 1
            try:
                await asyncio.wait_for(group.complete.wait(), wait_s)
            except asyncio.TimeoutError:
                self.timeouts += 1
            finally:
                group.waiting -= 1
            peers = [s for s, v in group.scores.items() if v is not None and s != sample_id]
            return group_mean([v for s, v in group.scores.items() if s in peers and v is not None], fallback), peers
        finally:
            self.settled += 1
            if group.complete.is_set() and group.waiting == 0 and len(group.scores) >= group.size:
                self._groups.pop(group_id, None)

    def _evict(self) -> None:
        now = time.monotonic()
        for gid in [g for g, grp in self._groups.items() if grp.waiting == 0 and now - grp.created > self.stale_s]:
            del self._groups[gid]

    async def observe(self, row: dict[str, object]) -> None:
        """One scored sample's summary, for the metrics window."""
        if self.metrics is not None:
            self.metrics.add(row)

    async def flush(self) -> dict[str, float]:
        """Emit the current metrics window now (end of a run); returns what was emitted."""
        return self.metrics.flush() if self.metrics is not None else {}

    async def stats(self) -> dict[str, int]:
        return {"open_groups": len(self._groups), "settled": self.settled, "timeouts": self.timeouts}

    async def close(self) -> None:
        if self.metrics is not None:
            self.metrics.flush()
            self.metrics.close()


def make_board(window: int, sinks: list[MetricsSink]) -> GroupBoard:
    return GroupBoard(RewardMetrics(window, sinks))
