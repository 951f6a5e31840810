"""Pre-flight: everything about a recipe that can be known before a GPU hour is spent.

In order: the recipe is found and every key it sets exists in verl; it composes with the overrides (Hydra's own
refusal of a misspelled override, with a suggestion); verl's own ``validate_config``; the GPU arithmetic; the
data files, their columns and prompt lengths; the reward function and its config; the judge; memory per GPU;
the installs the launch needs. Each check that cannot be made here says so as a warning instead of passing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rubric_rl.recipes.compose import (
    BASES,
    Recipe,
    RecipeError,
    base_config,
    compose_recipe,
    load_recipe,
    resolved,
)
from rubric_rl.recipes.data import check_rl_data, check_sft_data, data_files
from rubric_rl.recipes.gpus import check_gpus
from rubric_rl.recipes.keys import legacy_key_findings, recipe_keys, suggest, unknown_key_findings
from rubric_rl.recipes.memory import (
    estimate_memory,
    estimate_sft_memory,
    hosted_judge_findings,
    memory_findings,
)
from rubric_rl.recipes.model_spec import load_model_spec
from rubric_rl.recipes.report import Finding, PreflightConfig, Report
from rubric_rl.recipes.reward_check import check_judge, check_reward
from rubric_rl.recipes.tree import dig
from rubric_rl.recipes.verl_check import install_findings, run_validate_config, uses


@dataclass
class Preflight:
    """The report, and — where the recipe composed — the composed config and its resolved plain form."""

    report: Report
    recipe: Recipe | None = None
    composed: Any = None
    config: dict[str, Any] | None = None


def preflight(spec: str, overrides: list[str], settings: PreflightConfig | None = None) -> Preflight:
    """Run every check on recipe ``spec`` with Hydra ``overrides``."""
    settings = settings or PreflightConfig()
    report = Report(recipe=spec, entrypoint="unknown")
    try:
        recipe = load_recipe(spec)
    except RecipeError as e:
        report.add("error", "recipe", None, str(e))
        return Preflight(report)
    report.recipe, report.entrypoint = recipe.name, recipe.entrypoint
    base = base_config(recipe.base)
    report.extend(unknown_key_findings(recipe_keys(recipe.path, set(BASES)), base, recipe.base))
    try:
        composed = compose_recipe(recipe, overrides)
    except RecipeError as e:
        key, _, message = str(e).partition(": ")
        report.add("error", "keys", key or None, f"{message}{suggest(base, key) if key else ''}")
        return Preflight(report, recipe)
    cfg = resolved(composed)
    result = Preflight(report, recipe, composed, cfg)
    if recipe.entrypoint == "ppo":
        _ppo_checks(result, settings)
    else:
        _sft_checks(result, settings)
    return result


def _ppo_checks(result: Preflight, settings: PreflightConfig) -> None:
    report, cfg, composed = result.report, result.config, result.composed
    assert cfg is not None
    if dig(cfg, "actor_rollout_ref.rollout.name") in (None, "???"):
        report.add("error", "keys", "actor_rollout_ref.rollout.name", "mandatory: vllm, sglang or trtllm")
        return
    reward_findings, adapter_checked = check_reward(cfg, composed)
    if not adapter_checked:
        report.extend(legacy_key_findings(cfg))
    report.extend(run_validate_config(composed))
    use_ref, use_critic = uses(composed)
    plan, gpu_findings = check_gpus(cfg, use_critic)
    report.extend(gpu_findings)
    report.extend(check_rl_data(cfg, settings.tokenizer, settings.max_rows))
    report.extend(reward_findings)
    report.extend(check_judge(cfg, settings.judge_timeout_s))
    model_path = str(dig(cfg, "actor_rollout_ref.model.path"))
    spec, why = load_model_spec(model_path, settings.assume_model)
    if spec is None:
        report.add("warning", "memory", "actor_rollout_ref.model.path", f"memory not estimated: {why}")
    else:
        est = estimate_memory(cfg, spec, settings.gpu_memory_gib, use_critic=use_critic, use_ref=use_ref)
        report.extend(memory_findings(est, plan.sequences_per_replica if plan else None))
    if dig(cfg, "reward.reward_model.enable"):
        judge_spec, why = load_model_spec(str(dig(cfg, "reward.reward_model.model_path")))
        if judge_spec is None:
            report.add("warning", "memory", "reward.reward_model.model_path", f"judge memory not estimated: {why}")
        else:
            report.extend(hosted_judge_findings(cfg, judge_spec, settings.gpu_memory_gib))
    report.extend(install_findings(cfg, "ppo", settings.launching))


def _sft_checks(result: Preflight, settings: PreflightConfig) -> None:
    report, cfg = result.report, result.config
    assert cfg is not None
    report.extend(check_sft_data(cfg, settings.tokenizer, settings.max_rows))
    report.extend(_sft_batch_findings(cfg))
    spec, why = load_model_spec(str(dig(cfg, "model.path")), settings.assume_model)
    if spec is None:
        report.add("warning", "memory", "model.path", f"memory not estimated: {why}")
    else:
        report.extend(memory_findings(estimate_sft_memory(cfg, spec, settings.gpu_memory_gib)))
    report.extend(install_findings(cfg, "sft", settings.launching))


def _sft_batch_findings(cfg: dict[str, Any]) -> list[Finding]:
    """verl's SFT trainer splits ``data.train_batch_size`` over data-parallel ranks and drops the last partial
    batch of an epoch: a global batch larger than the dataset trains zero steps."""
    n_gpus = int(dig(cfg, "trainer.nnodes", 1)) * int(dig(cfg, "trainer.n_gpus_per_node", 1))
    batch = int(dig(cfg, "data.train_batch_size", 1))
    out: list[Finding] = []
    if batch % n_gpus:
        out.append(
            Finding(
                level="error",
                check="gpus",
                key="data.train_batch_size",
                message=f"{batch} does not split over {n_gpus} GPUs (trainer.nnodes x n_gpus_per_node)",
            )
        )
    rows = _parquet_rows(data_files(dig(cfg, "data.train_files")))
    if rows is not None:
        steps = rows // max(1, batch)
        level = "error" if steps == 0 else "info"
        out.append(
            Finding(
                level=level,
                check="data",
                key="data.train_batch_size" if steps == 0 else None,
                message=f"{rows} training rows / batch {batch} = {steps} step(s) per epoch",
            )
        )
    return out


def _parquet_rows(files: list[str]) -> int | None:
    from pathlib import Path

    import pyarrow.parquet as pq

    paths = [Path(f).expanduser() for f in files]
    if not paths or not all(p.is_file() for p in paths):
        return None
    return sum(pq.read_metadata(p).num_rows for p in paths)
