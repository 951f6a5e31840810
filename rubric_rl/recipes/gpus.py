"""GPU arithmetic of a verl run: what verl checks only at run time, or never.

verl's ``validate_config`` checks ``train_batch_size * rollout.n`` against the GPU count and the micro-batch
options. At run time, after the model is loaded, the engine asserts ``mini_batch_size % dp_size`` and vLLM asserts
that tensor parallelism divides the GPUs of a node. And ``num_replicas = world_size // rollout_world_size`` leaves
any remainder of GPUs idle through every rollout without a word. These checks say all of it before launch, each
naming the key to change.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rubric_rl.recipes.report import Finding
from rubric_rl.recipes.tree import dig

GROUP_ESTIMATORS = {
    "grpo",
    "grpo_vectorized",
    "grpo_passk",
    "rloo",
    "rloo_vectorized",
    "reinforce_plus_plus_baseline",
    "opo",
    "gpg",
    "gdpo",
}
AR = "actor_rollout_ref"


class GpuPlan(BaseModel):
    """How the run's GPUs are used."""

    n_gpus: int
    rollout_gpus_per_replica: int
    rollout_replicas: int
    actor_dp: int
    sequences_per_step: int

    @property
    def sequences_per_replica(self) -> int:
        return -(-self.sequences_per_step // max(1, self.rollout_replicas))


def _err(key: str, message: str) -> Finding:
    return Finding(level="error", check="gpus", key=key, message=message)


def _info(message: str) -> Finding:
    return Finding(level="info", check="gpus", key=None, message=message)


def _rollout_findings(n_gpus: int, per_node: int, tp: int, world: int, prefix: str, pool: str) -> list[Finding]:
    key = f"{prefix}.tensor_model_parallel_size"
    if tp > per_node:
        return [
            _err(
                key,
                f"{tp} is more than the {per_node} GPUs of one node ({pool}): a vLLM replica cannot span "
                "nodes in verl's hybrid engine",
            )
        ]
    if per_node % tp:
        return [
            _err(
                key,
                f"{tp} does not divide the {per_node} GPUs per node ({pool}); vLLM asserts "
                "'gpus_per_node should be divisible by tensor_model_parallel_size'",
            )
        ]
    if world > n_gpus:
        return [_err(key, f"one rollout replica needs {world} GPUs (tp x dp x pp) but {pool} has {n_gpus}")]
    if n_gpus % world:
        idle = n_gpus % world
        return [
            _err(
                key,
                f"{n_gpus} GPUs ({pool}) make {n_gpus // world} replicas of {world}: {idle} GPU(s) would "
                "sit idle through every rollout (verl drops the remainder silently)",
            )
        ]
    return []


def _batch_findings(cfg: dict[str, Any], section: str, n_resp: int, dp: int, batch: int) -> list[Finding]:
    s = dig(cfg, section, {})
    mini = int(s.get("ppo_mini_batch_size") or 0)
    key = f"{section}.ppo_mini_batch_size"
    out: list[Finding] = []
    if mini <= 0:
        return [_err(key, "must be positive")]
    if batch % mini:
        out.append(
            _err(
                key,
                f"{mini} does not divide data.train_batch_size {batch}: each step's batch must split "
                "into whole mini-batches",
            )
        )
    if (mini * n_resp) % dp:
        out.append(
            _err(
                key,
                f"{mini} prompts x rollout.n {n_resp} = {mini * n_resp} sequences per mini-batch do not "
                f"split over {dp} data-parallel ranks (the engine asserts mini_batch_size % dp_size)",
            )
        )
    elif not s.get("use_dynamic_bsz"):
        micro = s.get("ppo_micro_batch_size_per_gpu")
        per_gpu = mini * n_resp // dp
        if micro and per_gpu % int(micro):
            out.append(
                _err(
                    f"{section}.ppo_micro_batch_size_per_gpu",
                    f"{micro} does not divide the {per_gpu} sequences each GPU gets per mini-batch",
                )
            )
    return out


def check_gpus(cfg: dict[str, Any], use_critic: bool) -> tuple[GpuPlan | None, list[Finding]]:
    """The GPU plan of a resolved PPO config and every arithmetic error in it."""
    nnodes, per_node = int(dig(cfg, "trainer.nnodes", 1)), int(dig(cfg, "trainer.n_gpus_per_node", 1))
    n_gpus = nnodes * per_node
    if n_gpus <= 0:
        return None, [_err("trainer.n_gpus_per_node", f"trainer.nnodes x n_gpus_per_node = {n_gpus}")]
    rollout = dig(cfg, f"{AR}.rollout", {})
    tp = int(rollout.get("tensor_model_parallel_size", 1))
    world = tp * int(rollout.get("data_parallel_size", 1)) * int(rollout.get("pipeline_model_parallel_size", 1))
    out = _rollout_findings(n_gpus, per_node, tp, world, f"{AR}.rollout", "trainer.nnodes x trainer.n_gpus_per_node")

    sp = int(dig(cfg, f"{AR}.actor.ulysses_sequence_parallel_size", 1) or 1)
    if n_gpus % sp:
        out.append(_err(f"{AR}.actor.ulysses_sequence_parallel_size", f"{sp} does not divide {n_gpus} GPUs"))
    dp = max(1, n_gpus // sp)
    batch, n_resp = int(dig(cfg, "data.train_batch_size", 1)), int(rollout.get("n", 1))
    if dig(cfg, "algorithm.adv_estimator") in GROUP_ESTIMATORS and n_resp < 2:
        out.append(
            _err(
                f"{AR}.rollout.n",
                f"{dig(cfg, 'algorithm.adv_estimator')} compares responses within a "
                f"group: rollout.n={n_resp} gives every advantage 0",
            )
        )
    out += _batch_findings(cfg, f"{AR}.actor", n_resp, dp, batch)
    if use_critic:
        out += _batch_findings(cfg, "critic", n_resp, dp, batch)
    out += _length_findings(cfg)
    out += _reward_pool_findings(cfg, n_gpus, per_node)

    replicas = n_gpus // world if 0 < world <= n_gpus else 0
    plan = GpuPlan(
        n_gpus=n_gpus,
        rollout_gpus_per_replica=world,
        rollout_replicas=replicas,
        actor_dp=dp,
        sequences_per_step=batch * n_resp,
    )
    out.append(
        _info(
            f"{n_gpus} GPU(s): {replicas} vLLM replica(s) of {world} GPU(s), FSDP over {dp} data-parallel rank(s); "
            f"{batch} prompts x {n_resp} = {batch * n_resp} sequences per step, ~{plan.sequences_per_replica} "
            "per replica"
        )
    )
    return plan, out


def _length_findings(cfg: dict[str, Any]) -> list[Finding]:
    prompt, response = int(dig(cfg, "data.max_prompt_length", 0)), int(dig(cfg, "data.max_response_length", 0))
    out: list[Finding] = []
    max_len = dig(cfg, f"{AR}.rollout.max_model_len")
    if max_len is not None and int(max_len) < prompt + response:
        out.append(
            _err(
                f"{AR}.rollout.max_model_len",
                f"{max_len} is shorter than data.max_prompt_length + data.max_response_length = {prompt + response}",
            )
        )
    actor = dig(cfg, f"{AR}.actor", {})
    if actor.get("use_dynamic_bsz") and int(actor.get("ppo_max_token_len_per_gpu", 0)) < prompt + response:
        out.append(
            _err(
                f"{AR}.actor.ppo_max_token_len_per_gpu",
                f"{actor.get('ppo_max_token_len_per_gpu')} cannot "
                f"hold one sequence of {prompt + response} tokens (prompt + response)",
            )
        )
    return out


def _reward_pool_findings(cfg: dict[str, Any], n_gpus: int, per_node: int) -> list[Finding]:
    """A judge hosted by verl: in its own pool, or sharing the trainer's GPUs."""
    rm = dig(cfg, "reward.reward_model", {})
    if not rm.get("enable"):
        return []
    prefix = "reward.reward_model.rollout"
    r = rm.get("rollout", {})
    tp = int(r.get("tensor_model_parallel_size", 1))
    world = tp * int(r.get("data_parallel_size", 1)) * int(r.get("pipeline_model_parallel_size", 1))
    out: list[Finding] = []
    if not rm.get("model_path"):
        out.append(_err("reward.reward_model.model_path", "a hosted judge needs its model path"))
    if rm.get("enable_resource_pool"):
        nodes, gpus = int(rm.get("nnodes", 0)), int(rm.get("n_gpus_per_node", 0))
        if nodes <= 0 or gpus <= 0:
            return out + [
                _err(
                    "reward.reward_model.nnodes",
                    f"the judge's own pool has nnodes={nodes} x n_gpus_per_node={gpus} GPUs",
                )
            ]
        out += _rollout_findings(nodes * gpus, gpus, tp, world, prefix, "the judge's pool")
        out.append(
            _info(
                f"the judge has its own pool of {nodes * gpus} GPU(s), {nodes * gpus // max(1, world)} "
                "replica(s): the "
                f"job needs {n_gpus + nodes * gpus} GPUs in all"
            )
        )
    else:
        out += _rollout_findings(n_gpus, per_node, tp, world, prefix, "the trainer's GPUs, shared with the judge")
    return out
