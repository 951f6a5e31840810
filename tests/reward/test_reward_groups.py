"""Masking: a masked sample is given its group's mean, which verl 0.9.1's own GRPO estimator turns into an
advantage of exactly 0, leaving the group's honest samples as they would be without it."""

from __future__ import annotations

import asyncio
import math

import pytest

from rubric_rl.reward import GroupBoard, group_mean


def settle_all(board: GroupBoard, group: str, size: int, scores: list[float | None], wait_s: float = 5.0):
    async def run():
        return await asyncio.gather(
            *(board.settle(group, size, f"s{i}", s, wait_s, -7.0) for i, s in enumerate(scores))
        )

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([None, 1.0, 2.0, 3.0], [2.0, 1.0, 2.0, 3.0]),  # the masked one first: it waits for the rest
        ([1.0, 2.0, 3.0, None], [1.0, 2.0, 3.0, 2.0]),
        ([None, 1.0, None, 4.0], [2.5, 1.0, 2.5, 4.0]),  # masked peers do not count
        ([None, None], [-7.0, -7.0]),  # nothing unmasked: the fallback
        ([0.5, -1.0], [0.5, -1.0]),  # nothing masked: own scores
    ],
)
def test_masked_sample_gets_its_group_mean(scores, expected) -> None:
    board = GroupBoard()
    results = settle_all(board, "uid-1", len(scores), scores)
    assert [r[0] for r in results] == pytest.approx(expected)
    for (_, peers), own in zip(results, scores, strict=True):
        if own is None:
            assert all(scores[int(p[1:])] is not None for p in peers)
    assert asyncio.run(board.stats())["open_groups"] == 0


def test_incomplete_group_is_settled_after_the_wait() -> None:
    board = GroupBoard()
    results = settle_all(board, "uid-2", 3, [None, 3.0], wait_s=0.2)  # the third member never comes
    assert results[0] == (3.0, ["s1"])
    assert asyncio.run(board.stats())["timeouts"] == 1


def test_groups_do_not_mix() -> None:
    async def run():
        board = GroupBoard()
        return await asyncio.gather(
            board.settle("a", 2, "a0", None, 5, 0.0),
            board.settle("b", 2, "b0", 10.0, 5, 0.0),
            board.settle("b", 2, "b1", None, 5, 0.0),
            board.settle("a", 2, "a1", 1.0, 5, 0.0),
        )

    assert [r[0] for r in asyncio.run(run())] == [1.0, 10.0, 10.0, 1.0]


@pytest.mark.parametrize("norm_by_std", [False, True])
def test_verl_grpo_advantage_of_a_group_mean_is_zero(norm_by_std: bool) -> None:
    """Through verl 0.9.1's own estimator (trainer/ppo/core_algos.py::compute_grpo_outcome_advantage)."""
    pytest.importorskip("verl")
    import numpy as np
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    honest = [2.875, 0.0, -1.0, 0.0, 1.5]
    masked_value = group_mean(honest, 0.0)

    def advantages(scores: list[float]) -> torch.Tensor:
        n = len(scores)
        rewards = torch.zeros(n, 4)
        rewards[:, -1] = torch.tensor(scores)
        adv, _ = compute_grpo_outcome_advantage(
            rewards, torch.ones(n, 4), np.array(["uid"] * n, dtype=object), norm_adv_by_std_in_grpo=norm_by_std
        )
        return adv[:, -1]

    with_masked = advantages([*honest, masked_value])
    alone = advantages(honest)
    assert with_masked[-1].item() == pytest.approx(0.0, abs=1e-6)
    n, m = len(honest) + 1, len(honest)
    scale = math.sqrt((n - 1) / (m - 1)) if norm_by_std else 1.0  # std over one more sample at the mean
    assert with_masked[:-1].tolist() == pytest.approx((alone * scale).tolist(), rel=1e-5)
    # A plain 0 for the lost sample would have moved every honest advantage:
    with_zero = advantages([*honest, 0.0])
    assert with_zero[:-1].tolist() != pytest.approx((alone * scale).tolist(), rel=1e-3)
