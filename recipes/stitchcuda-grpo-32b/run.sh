#!/usr/bin/env bash
# stitchcuda-grpo-32b: check the recipe, then launch verl's main_ppo (README.md beside this file).
#
#   JUDGE_BASE_URL=http://judge-host:8000/v1 JUDGE_MODEL=Qwen/Qwen2.5-Coder-32B-Instruct \
#     bash recipes/stitchcuda-grpo-32b/run.sh                  # external judge (`rubric-rl serve judge`)
#   JUDGE=hosted bash recipes/stitchcuda-grpo-32b/run.sh       # judge hosted by verl on one more node
#   RAY_ADDRESS=http://head:8265 bash recipes/stitchcuda-grpo-32b/run.sh   # as a Ray job on a cluster
#
# Environment (each optional; the recipe's values otherwise): MODEL, NNODES, GPUS_PER_NODE, DATA_DIR (with
# generate/ and refine/ from `rubric-rl skills build`), RUN_DIR, JUDGE (external|hosted), JUDGE_BASE_URL,
# JUDGE_MODEL; and those of recipes/common.sh. Anything after the script name is a Hydra override.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

RECIPE="$RECIPES_DIR/stitchcuda-grpo-32b/recipe.yaml"
RUN_DIR="${RUN_DIR:-runs/stitchcuda-grpo-32b}"
KW=reward.custom_reward_function.reward_kwargs.judge
ARGS=("judge=${JUDGE:-external}" "trainer.default_local_dir=$RUN_DIR")
[[ -n "${MODEL:-}" ]] && ARGS+=("actor_rollout_ref.model.path=$MODEL")
[[ -n "${NNODES:-}" ]] && ARGS+=("trainer.nnodes=$NNODES")
[[ -n "${GPUS_PER_NODE:-}" ]] && ARGS+=("trainer.n_gpus_per_node=$GPUS_PER_NODE")
if [[ -n "${DATA_DIR:-}" ]]; then
  ARGS+=("data.train_files=[$DATA_DIR/generate/train.parquet,$DATA_DIR/refine/train.parquet]"
    "data.val_files=[$DATA_DIR/generate/val.parquet,$DATA_DIR/refine/val.parquet]")
fi
if [[ -n "${JUDGE_BASE_URL:-}" ]]; then
  ARGS+=("$KW.base_url=$JUDGE_BASE_URL" "$KW.model=${JUDGE_MODEL:?set JUDGE_MODEL with JUDGE_BASE_URL}")
fi

check "$RECIPE" "$RUN_DIR" "${ARGS[@]}" "$@"
run_ppo "$RECIPE" "${ARGS[@]}" "$@"
