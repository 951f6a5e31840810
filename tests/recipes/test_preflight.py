"""Every bundled recipe composes with verl 0.9.1's own config and passes pre-flight on CPU; each kind of
misconfiguration fails with a message naming the key."""

from __future__ import annotations

import pytest
from recipe_fixtures import BUNDLED, REFERENCE, rl_rows, write_parquet


def errors(report) -> list[str]:
    return [f.line() for f in report.findings if f.level == "error"]


@pytest.mark.parametrize("name", [*BUNDLED, "stitchcuda-grpo-32b judge=hosted"])
def test_every_bundled_recipe_passes_preflight(checked, name):
    result = checked[name]
    assert result.report.ok, "\n".join(errors(result.report))
    assert result.config is not None and result.recipe is not None
    checks = {f.check for f in result.report.findings}
    if result.recipe.entrypoint == "ppo":
        assert {"gpus", "memory", "reward", "judge"} <= checks
        kwargs = result.config["reward"]["custom_reward_function"]["reward_kwargs"]
        assert kwargs["rule"]["name"] in ("speedup", "milestone")
    else:
        assert "data" in checks and "memory" in checks


def test_recipes_name_the_reward_function_by_package_not_by_file(verl_installed):
    """pkg:// resolves in a checkout and in an installed wheel alike; a file path would not."""
    import yaml

    from rubric_rl.resources import content_dir

    for path in content_dir("recipes").rglob("*.yaml"):
        raw = yaml.safe_load(path.read_text()) or {}
        if not isinstance(raw, dict):  # agent_loop.yaml: verl's list of agent loops
            continue
        reward_path = ((raw.get("reward") or {}).get("custom_reward_function") or {}).get("path")
        if reward_path is not None:
            assert reward_path == "pkg://rubric_rl.reward.verl", path


def test_staged_recipe_stages_name_each_others_files(checked):
    stage = {n.split("/")[1]: checked[n].config for n in BUNDLED if n.startswith("cuda-agent")}
    warmup_dir = stage["stage1_warmup"]["trainer"]["default_local_dir"]
    assert "hf_model" in stage["stage1_warmup"]["actor_rollout_ref"]["actor"]["checkpoint"]["save_contents"]
    assert stage["stage1_warmup"]["reward"]["custom_reward_function"]["reward_kwargs"]["ledger"]["dir"] == warmup_dir
    # the recipe files themselves (before the test's overrides) chain the stages' outputs
    import yaml

    from rubric_rl.recipes.compose import load_recipe

    raw = {s: yaml.safe_load(load_recipe(f"cuda-agent-staged/{s}").path.read_text()) for s in stage}
    common = yaml.safe_load((load_recipe("cuda-agent-staged/stage3_critic").path.parent / "ppo_agent.yaml").read_text())
    assert raw["stage2_rft"]["model"]["path"] == f"{warmup_dir}/final_hf"
    assert (
        common["actor_rollout_ref"]["model"]["path"] == f"{raw['stage2_rft']['trainer']['default_local_dir']}/final_hf"
    )
    s3, s4 = stage["stage3_critic"], stage["stage4_ppo"]
    assert s3["trainer"]["default_local_dir"] == s4["trainer"]["default_local_dir"]  # stage 4 resumes stage 3
    assert (
        s3["trainer"]["total_training_steps"] == s3["trainer"]["critic_warmup"] < s4["trainer"]["total_training_steps"]
    )
    assert s4["algorithm"]["adv_estimator"] == "gae" and s4["critic"]["enable"] is True


def test_legacy_reward_key_is_rejected(one_gpu):
    report = one_gpu("custom_reward_function.path=/somewhere/reward.py")
    assert any("custom_reward_function.path" in e and "legacy" in e for e in errors(report)), errors(report)


def test_misspelled_override_fails_naming_the_key_and_a_suggestion(one_gpu):
    report = one_gpu("data.max_prompt_lenght=8192")
    (line,) = errors(report)
    assert "data.max_prompt_lenght" in line and "did you mean data.max_prompt_length" in line and "+data" in line


def test_misspelled_key_in_a_recipe_file_fails_naming_it(verl_installed, tmp_path):
    from rubric_rl.recipes import preflight
    from rubric_rl.resources import content_dir

    text = (content_dir("recipes") / "one-gpu-try" / "recipe.yaml").read_text()
    bad = tmp_path / "recipe.yaml"
    bad.write_text(text.replace("  max_response_length: 4096", "  max_response_lenght: 4096"))
    report = preflight(str(bad), []).report
    hits = [f for f in report.findings if f.check == "keys" and f.level == "error"]
    assert [f.key for f in hits] == ["data.max_response_lenght"]
    assert "did you mean data.max_response_length" in hits[0].message


def test_batch_that_does_not_divide_fails_naming_the_key(one_gpu):
    report = one_gpu("data.train_batch_size=12")  # ppo_mini_batch_size 8 does not divide 12
    assert any(f.key == "actor_rollout_ref.actor.ppo_mini_batch_size" for f in report.errors), errors(report)


def test_tensor_parallelism_that_does_not_fit_fails_naming_the_key(one_gpu):
    report = one_gpu("actor_rollout_ref.rollout.tensor_model_parallel_size=2")  # one GPU
    keys = {f.key for f in report.errors}
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size" in keys, errors(report)


def test_idle_gpus_are_an_error(one_gpu):
    report = one_gpu("trainer.n_gpus_per_node=6", "actor_rollout_ref.rollout.tensor_model_parallel_size=4")
    assert any("idle" in e or "does not divide" in e for e in errors(report)), errors(report)


def test_missing_data_file_fails_naming_the_key(one_gpu, tmp_path):
    report = one_gpu(f"data.val_files=[{tmp_path / 'nowhere.parquet'}]")
    (line,) = errors(report)
    assert "data.val_files" in line and "nowhere.parquet" in line and "rubric-rl skills build" in line


def test_missing_column_fails_naming_the_key(one_gpu, tmp_path):
    rows = [{k: v for k, v in r.items() if k != "data_source"} for r in rl_rows(4, 10)]
    path = write_parquet(tmp_path / "nosource.parquet", rows)
    report = one_gpu(f"data.val_files=[{path}]")
    assert any(f.key == "data.reward_fn_key" and "data_source" in f.message for f in report.errors), errors(report)


def test_prompt_too_long_fails_naming_the_key(one_gpu, tmp_path):
    path = write_parquet(tmp_path / "long.parquet", rl_rows(3, 300))
    report = one_gpu(f"data.val_files=[{path}]", "data.max_prompt_length=400")  # train rows: ~170 tokens
    (finding,) = [f for f in report.errors]
    assert finding.key == "data.max_prompt_length" and "3 row(s) over 400 tokens" in finding.message
    filtered = one_gpu(f"data.val_files=[{path}]", "data.max_prompt_length=400", "data.filter_overlong_prompts=true")
    assert filtered.ok and any(f.key == "data.max_prompt_length" and f.level == "warning" for f in filtered.findings)


def test_verl_validate_config_failure_is_reported_with_its_key(one_gpu):
    report = one_gpu("actor_rollout_ref.actor.use_dynamic_bsz=false")  # no micro-batch size set
    assert any(f.check == "verl" for f in report.errors), errors(report)


def test_reward_function_that_does_not_import_fails_naming_the_key(one_gpu, tmp_path):
    report = one_gpu(f"reward.custom_reward_function.path={tmp_path / 'missing_reward.py'}")
    assert any(f.key == "reward.custom_reward_function.path" for f in report.errors), errors(report)
    named = one_gpu("reward.custom_reward_function.name=no_such_function")
    assert any(f.key == "reward.custom_reward_function.name" for f in named.errors), errors(named)


def test_reward_config_that_does_not_load_fails_naming_the_field(one_gpu):
    report = one_gpu("reward.custom_reward_function.reward_kwargs.rule.name=fastest")
    assert any(
        (f.key or "").startswith("reward.custom_reward_function.reward_kwargs") and "rule.name" in f.message
        for f in report.errors
    ), errors(report)


def test_judge_must_answer_or_be_chosen_offline(one_gpu, judge_server):
    kw = "reward.custom_reward_function.reward_kwargs.judge"
    neither = one_gpu(f"{kw}.offline=false")
    assert any(f.key == f"{kw}.base_url" and "offline" in f.message for f in neither.errors), errors(neither)
    down = one_gpu(f"{kw}.offline=false", f"{kw}.base_url=http://127.0.0.1:9/v1", f"{kw}.model=x")
    assert any(f.key == f"{kw}.base_url" and "not reachable" in f.message for f in down.errors), errors(down)
    wrong = one_gpu(f"{kw}.offline=false", f"{kw}.base_url={judge_server.url}", f"{kw}.model=other")
    assert any(f.key == f"{kw}.model" for f in wrong.errors), errors(wrong)
    up = one_gpu(f"{kw}.offline=false", f"{kw}.base_url={judge_server.url}", f"{kw}.model=stub-judge")
    assert up.ok and any("answers at" in f.message for f in up.findings)


def test_memory_that_cannot_fit_is_an_error(one_gpu):
    """A 32B full fine-tune on one 80 GB GPU: the estimate (from the bundled table, labelled so) refuses it."""
    report = one_gpu(
        "actor_rollout_ref.model.lora_rank=0",
        "actor_rollout_ref.model.path=/nonexistent/Qwen2.5-Coder-32B-Instruct",
    )
    memory = [f for f in report.findings if f.check == "memory"]
    assert any(f.level == "warning" and "models.yaml" in f.message for f in memory)
    assert any(f.level == "error" and "does not fit" in f.message for f in memory), [f.line() for f in memory]


def test_sft_batch_larger_than_the_dataset_is_an_error(verl_installed, tiny_model, data_dir):
    from rubric_rl.recipes import preflight

    report = preflight(
        "cuda-agent-staged/stage2_rft",
        [
            f"model.path={tiny_model}",
            f"data.train_files={data_dir / 'rft' / 'train.parquet'}",
            "data.train_batch_size=64",
        ],
    ).report
    assert any(f.key == "data.train_batch_size" and "0 step(s)" in f.message for f in report.errors), errors(report)


def test_folder_without_default_lists_its_stages(verl_installed):
    from rubric_rl.recipes import preflight

    report = preflight("cuda-agent-staged", []).report
    (line,) = errors(report)
    assert "cuda-agent-staged/stage1_warmup" in line and "ppo_agent" not in line


def test_reference_in_the_fixture_rows_is_a_program():
    assert "class Model" in REFERENCE
