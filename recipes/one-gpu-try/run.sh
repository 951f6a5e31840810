#!/usr/bin/env bash
# one-gpu-try: check the recipe, then launch verl's main_ppo on this machine's one GPU (README.md beside this file).
#
#   bash recipes/one-gpu-try/run.sh                                        # offline heuristic judge
#   JUDGE_BASE_URL=https://api.example/v1 JUDGE_MODEL=NAME bash recipes/one-gpu-try/run.sh   # an LLM judge
#   MODEL=Qwen/Qwen2.5-Coder-1.5B-Instruct bash recipes/one-gpu-try/run.sh actor_rollout_ref.model.lora_rank=0
#
# Environment (each optional): MODEL, DATA_DIR (with train.parquet and val.parquet of the generate skill),
# RUN_DIR, JUDGE_BASE_URL, JUDGE_MODEL; and those of recipes/common.sh. Anything after the script name is a Hydra
# override.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

RECIPE="$RECIPES_DIR/one-gpu-try/recipe.yaml"
RUN_DIR="${RUN_DIR:-runs/one-gpu-try}"
KW=reward.custom_reward_function.reward_kwargs.judge
ARGS=("trainer.default_local_dir=$RUN_DIR")
[[ -n "${MODEL:-}" ]] && ARGS+=("actor_rollout_ref.model.path=$MODEL")
if [[ -n "${DATA_DIR:-}" ]]; then
  ARGS+=("data.train_files=[$DATA_DIR/train.parquet]" "data.val_files=[$DATA_DIR/val.parquet]")
fi
if [[ -n "${JUDGE_BASE_URL:-}" ]]; then
  ARGS+=("$KW.offline=false" "$KW.base_url=$JUDGE_BASE_URL" "$KW.model=${JUDGE_MODEL:?set JUDGE_MODEL with JUDGE_BASE_URL}")
fi

check "$RECIPE" "$RUN_DIR" "${ARGS[@]}" "$@"
run_ppo "$RECIPE" "${ARGS[@]}" "$@"
