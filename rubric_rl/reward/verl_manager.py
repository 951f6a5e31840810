"""verl 0.9.1's reward manager for rubric-rl: verl's naive manager plus what the reward needs of the row.

Configure it with ``reward.reward_manager.source=importlib``, ``reward.reward_manager.name=RubricRewardManager``,
``reward.reward_manager.module.path=pkg://rubric_rl.reward.verl_manager``. Like the naive manager it decodes
the last sequence's valid response tokens and awaits the reward function once per sample; it also passes the
row's group (verl's ``uid``, and ``actor_rollout_ref.rollout.n`` as its size) and its chat prompt
(``raw_prompt``), so a masked sample can be given its group's mean and the ledger keeps the prompt.

This module imports verl; it is loaded only by verl.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from rubric_rl.reward import verl as adapter


class RubricRewardManager(RewardManagerBase):
    """Scores one sample per ``run_single`` through ``rubric_rl.reward.verl.compute_score``."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        fn = config.reward.custom_reward_function
        if fn.get("path") is None:
            # verl hands its default (math) scorer when no custom function is set: use ours, with its kwargs.
            compute_score = partial(adapter.compute_score, **dict(fn.get("reward_kwargs") or {}))
        self.score_fn: Any = compute_score
        self.decoder: Any = tokenizer
        self.group_size = int(config.actor_rollout_ref.rollout.n)

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1]  # multi-sequence outputs: the reward is the last sequence's
        response_ids = item.batch["responses"]
        valid = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        text = await self.loop.run_in_executor(
            None, lambda: self.decoder.decode(response_ids[:valid], skip_special_tokens=True)
        )
        fields = item.non_tensor_batch
        extra_info = dict(fields.get("extra_info") or {})
        uid = fields.get("uid")
        prompt = fields.get("raw_prompt")
        result = await self.score_fn(
            data_source=fields["data_source"],
            solution_str=text,
            ground_truth=fields["reward_model"]["ground_truth"],
            extra_info=extra_info,
            group_id=str(uid) if uid is not None else None,
            group_size=self.group_size,
            prompt=list(prompt) if prompt is not None else [],
        )
        return {"reward_score": result["score"], "reward_extra_info": dict(result)}
