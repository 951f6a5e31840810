"""The adapter with no configuration at all, as in a notebook: default RewardConfig, cpu backend (no GPU
here), offline judge, an executor in this process shared by calls from different event loops."""

from __future__ import annotations

import asyncio

import pytest

from rubric_rl.reward import RewardConfig
from rubric_rl.reward.verl import compute_score, extra_keys

pytestmark = pytest.mark.slow


def test_compute_score_with_no_configuration(reference: str, responses: dict[str, str]) -> None:
    hack = asyncio.run(compute_score("cpu_demo", responses["hack"], reference, {"task_id": "fused_add_relu"}))
    # a second event loop, as a notebook's next cell: the same in-process executor serves it
    none = asyncio.run(compute_score("cpu_demo", responses["unparsable"], reference, None))
    assert list(hack) == list(none) == extra_keys(RewardConfig())
    assert (hack["score"], hack["hack"], hack["compiled"]) == (-1.0, 1.0, 1.0)
    assert (none["score"], none["compiled"], none["judged"], none["masked"]) == (0.0, 0.0, 0.0, 0.0)
    assert all(isinstance(v, float) for v in hack.values())


def test_a_bad_reference_is_a_bug_not_a_reward(responses: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"reward_model\.ground_truth.*defines no top-level class 'Model'"):
        asyncio.run(compute_score("cpu_demo", responses["hack"], "x = 1\n", {"task_id": "t"}))
