"""GPU arithmetic and memory per GPU, table-driven on plain config dicts (no verl needed)."""

from __future__ import annotations

import copy

import pytest

from rubric_rl.recipes.gpus import check_gpus
from rubric_rl.recipes.memory import estimate_memory, memory_findings
from rubric_rl.recipes.model_spec import load_model_spec, model_table, spec_from_hf_config

AR = "actor_rollout_ref"


def config(**changes: object) -> dict:
    """A 4 x 8 GPU GRPO config in the shape of a resolved verl config."""
    cfg = {
        "trainer": {"nnodes": 4, "n_gpus_per_node": 8},
        "data": {"train_batch_size": 64, "max_prompt_length": 4096, "max_response_length": 8192},
        "algorithm": {"adv_estimator": "grpo"},
        AR: {
            "model": {"lora_rank": 0, "enable_gradient_checkpointing": True},
            "actor": {
                "ppo_mini_batch_size": 16,
                "use_dynamic_bsz": True,
                "ppo_max_token_len_per_gpu": 16384,
                "ulysses_sequence_parallel_size": 1,
                "fsdp_config": {"model_dtype": "fp32", "fsdp_size": -1},
            },
            "rollout": {
                "n": 8,
                "tensor_model_parallel_size": 4,
                "data_parallel_size": 1,
                "pipeline_model_parallel_size": 1,
                "gpu_memory_utilization": 0.5,
                "max_model_len": 12288,
            },
            "ref": {"fsdp_config": {"model_dtype": "fp32"}},
        },
        "critic": {"ppo_mini_batch_size": 16, "use_dynamic_bsz": True, "fsdp": {"model_dtype": "fp32"}, "model": {}},
        "reward": {"reward_model": {"enable": False}},
    }
    for key, value in changes.items():
        node = cfg
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return cfg


def error_keys(findings) -> set[str]:
    return {f.key for f in findings if f.level == "error"}


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({}, None),
        ({f"{AR}.rollout.tensor_model_parallel_size": 3}, f"{AR}.rollout.tensor_model_parallel_size"),
        ({f"{AR}.rollout.tensor_model_parallel_size": 16}, f"{AR}.rollout.tensor_model_parallel_size"),
        ({"trainer.n_gpus_per_node": 6}, f"{AR}.rollout.tensor_model_parallel_size"),  # 4 does not divide 6
        (
            {"trainer.nnodes": 1, "trainer.n_gpus_per_node": 6, f"{AR}.rollout.tensor_model_parallel_size": 4},
            f"{AR}.rollout.tensor_model_parallel_size",
        ),
        ({"data.train_batch_size": 40}, f"{AR}.actor.ppo_mini_batch_size"),
        (
            {f"{AR}.actor.ppo_mini_batch_size": 2, f"{AR}.rollout.n": 4, "data.train_batch_size": 64},
            f"{AR}.actor.ppo_mini_batch_size",
        ),  # 2 x 4 = 8 sequences over 32 ranks
        ({f"{AR}.rollout.n": 1}, f"{AR}.rollout.n"),
        ({f"{AR}.rollout.max_model_len": 8192}, f"{AR}.rollout.max_model_len"),
        ({f"{AR}.actor.ppo_max_token_len_per_gpu": 8192}, f"{AR}.actor.ppo_max_token_len_per_gpu"),
        (
            {f"{AR}.actor.use_dynamic_bsz": False, f"{AR}.actor.ppo_micro_batch_size_per_gpu": 3},
            f"{AR}.actor.ppo_micro_batch_size_per_gpu",
        ),
    ],
)
def test_gpu_arithmetic(changes, key):
    """Each broken plan names its key (a broken plan often breaks more than one rule: all are reported)."""
    plan, findings = check_gpus(config(**changes), use_critic=False)
    if key is None:
        assert error_keys(findings) == set(), [f.line() for f in findings]
    else:
        assert key in error_keys(findings), [f.line() for f in findings]


def test_plan_counts_replicas_and_idle_gpus_are_named():
    plan, findings = check_gpus(config(), use_critic=False)
    assert plan is not None and (plan.n_gpus, plan.rollout_replicas, plan.actor_dp) == (32, 8, 32)
    assert plan.sequences_per_replica == 64
    _, idle = check_gpus(
        config(
            **{
                "trainer.nnodes": 3,
                f"{AR}.rollout.tensor_model_parallel_size": 8,
                f"{AR}.rollout.data_parallel_size": 2,
            }
        ),
        use_critic=False,
    )
    (line,) = [f.message for f in idle if f.level == "error" and "idle" in f.message]
    assert "24 GPUs" in line and "1 replicas of 16: 8 GPU(s) would sit idle" in line


def test_critic_batch_is_checked_when_the_critic_is_on():
    cfg = config(**{"critic.ppo_mini_batch_size": 24})
    assert "critic.ppo_mini_batch_size" not in error_keys(check_gpus(cfg, use_critic=False)[1])
    assert "critic.ppo_mini_batch_size" in error_keys(check_gpus(cfg, use_critic=True)[1])


def test_hosted_judge_pool_arithmetic():
    rm = {
        "enable": True,
        "enable_resource_pool": True,
        "nnodes": 1,
        "n_gpus_per_node": 8,
        "model_path": "j",
        "rollout": {"tensor_model_parallel_size": 3, "data_parallel_size": 1, "pipeline_model_parallel_size": 1},
    }
    _, findings = check_gpus(config(**{"reward.reward_model": rm}), use_critic=False)
    assert error_keys(findings) == {"reward.reward_model.rollout.tensor_model_parallel_size"}
    rm = {**rm, "nnodes": 0}
    assert "reward.reward_model.nnodes" in error_keys(check_gpus(config(**{"reward.reward_model": rm}), False)[1])


@pytest.mark.parametrize(("name", "billions"), [("qwen2.5-32b", 32.5), ("qwen2.5-7b", 7.61), ("qwen2.5-1.5b", 1.54)])
def test_table_parameter_counts_match_the_published_sizes(name, billions):
    spec, why = load_model_spec(f"/nonexistent/{name}", assume=name)
    assert spec is not None and spec.estimated and "models.yaml" in spec.source, why
    assert spec.n_params / 1e9 == pytest.approx(billions, rel=0.01)


def test_model_names_match_table_entries_and_unknown_names_say_why():
    spec, _ = load_model_spec("/nonexistent/Qwen2.5-Coder-32B-Instruct")
    assert spec is not None and spec.name == "qwen2.5-32b"
    none, why = load_model_spec("/nonexistent/some-other-model")
    assert none is None and "--assume-model" in why and all(k in why for k in model_table())


def test_memory_of_a_full_fine_tune_adds_up():
    spec = spec_from_hf_config({k: v for k, v in model_table()["qwen2.5-7b"].items() if k != "match"}, "7b", "t")
    cfg = config(**{"trainer.nnodes": 1})  # 8 GPUs
    est = estimate_memory(cfg, spec, gpu_gib=80, use_critic=False, use_ref=False)
    rows = {r.component: r.gib for r in est.rows if r.phase == "training"}
    per_gpu_states = spec.n_params * 16 / 8 / 1024**3  # fp32 weights + fp32 grads + two Adam moments, 8 shards
    assert sum(v for k, v in rows.items() if k.startswith("actor")) == pytest.approx(per_gpu_states)
    assert est.kv_tokens == int((40 - spec.n_params * 2 / 4 / 1024**3 - 2) * 1024**3 // spec.kv_bytes_per_token(4))
    assert all(f.level != "error" for f in memory_findings(est))


def test_memory_that_cannot_fit_names_the_largest_part():
    spec = spec_from_hf_config({k: v for k, v in model_table()["qwen2.5-32b"].items() if k != "match"}, "32b", "t")
    cfg = config(**{"trainer.nnodes": 1, "trainer.n_gpus_per_node": 1, f"{AR}.rollout.tensor_model_parallel_size": 1})
    errors = [f for f in memory_findings(estimate_memory(cfg, spec, 80, False, False)) if f.level == "error"]
    assert {f.key for f in errors} >= {f"{AR}.actor.fsdp_config.optimizer_offload"}
    tight = copy.deepcopy(config(**{f"{AR}.rollout.gpu_memory_utilization": 0.22}))  # 0.3 GiB left for KV
    kv = [f for f in memory_findings(estimate_memory(tight, spec, 80, False, False)) if f.level == "error"]
    assert [f.key for f in kv] == [f"{AR}.rollout.gpu_memory_utilization"]


def test_lengths_beyond_the_models_positions_are_errors():
    entry = {k: v for k, v in model_table()["qwen2.5-7b"].items() if k != "match"}
    spec = spec_from_hf_config({**entry, "max_position_embeddings": 8192}, "7b", "t")
    est = estimate_memory(config(), spec, gpu_gib=80, use_critic=False, use_ref=False)  # 4096 + 8192, vLLM 12288
    keys = {f.key for f in memory_findings(est) if f.level == "error"}
    assert keys == {f"{AR}.rollout.max_model_len", "data.max_response_length"}
