# Shared by the recipes' run.sh scripts (sourced, not run): find rubric_rl, check a recipe, launch verl here or as
# a Ray job. Environment: PYTHON (default python3), RAY_ADDRESS (submit to that Ray cluster instead of running
# here), SKIP_CHECK=1 (launch without the pre-flight check), GPU_MEMORY_GIB, ASSUME_MODEL (see rubric-rl train).

PYTHON="${PYTHON:-python3}"
RECIPES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# In a source checkout (recipes/ beside rubric_rl/) nothing needs installing: the checkout goes on PYTHONPATH,
# which verl's local Ray workers inherit. On a cluster, install rubric-rl on every node instead.
if ! "$PYTHON" -c "import rubric_rl" 2>/dev/null && [[ -d "$RECIPES_DIR/../rubric_rl" ]]; then
  PYTHONPATH="$(cd "$RECIPES_DIR/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
fi

rubric_rl() { "$PYTHON" -m rubric_rl.cli "$@"; }

# check RECIPE_YAML RUN_DIR [overrides...]: every pre-flight check; the resolved config goes to RUN_DIR.
check() {
  local recipe="$1" run_dir="$2"
  shift 2
  [[ "${SKIP_CHECK:-0}" == 1 ]] && return 0
  local opts=(--dry-run --no-show-config --write-config "$run_dir")
  [[ -n "${GPU_MEMORY_GIB:-}" ]] && opts+=(--gpu-memory-gib "$GPU_MEMORY_GIB")
  [[ -n "${ASSUME_MODEL:-}" ]] && opts+=(--assume-model "$ASSUME_MODEL")
  rubric_rl train "$recipe" "$@" "${opts[@]}"
}

# run_ppo RECIPE_YAML [overrides...]: verl's main_ppo here, or as a Ray job when RAY_ADDRESS is set (the job's
# driver runs on the head node: the recipe path, data and run folders must exist there, e.g. a shared filesystem).
run_ppo() {
  local recipe="$1"
  shift
  local args=(-m verl.trainer.main_ppo --config-path "$(dirname "$recipe")" --config-name "$(basename "$recipe" .yaml)" "$@")
  if [[ -n "${RAY_ADDRESS:-}" ]]; then
    ray job submit --address "$RAY_ADDRESS" -- python3 "${args[@]}"
  else
    "$PYTHON" "${args[@]}"
  fi
}

# run_sft RECIPE_YAML NNODES GPUS_PER_NODE [overrides...]: verl's sft_trainer under torchrun. With NNODES > 1, run
# the same command on every node with MASTER_ADDR (and MASTER_PORT, default 29500) set to the first node's.
run_sft() {
  local recipe="$1" nnodes="$2" gpus="$3"
  shift 3
  local where=(--standalone)
  if [[ "$nnodes" -gt 1 ]]; then
    where=(--nnodes="$nnodes" --rdzv-backend=c10d --rdzv-endpoint="${MASTER_ADDR:?set MASTER_ADDR}:${MASTER_PORT:-29500}")
  fi
  torchrun "${where[@]}" --nproc-per-node="$gpus" -m verl.trainer.sft_trainer \
    --config-path "$(dirname "$recipe")" --config-name "$(basename "$recipe" .yaml)" trainer.nnodes="$nnodes" \
    trainer.n_gpus_per_node="$gpus" "$@"
}

# link_final RUN_DIR SUBPATH: RUN_DIR/final_hf -> the Hugging Face weights of the run's last checkpoint.
link_final() {
  local run_dir="$1" sub="$2" step
  step="$(cat "$run_dir/latest_checkpointed_iteration.txt")"
  ln -sfn "global_step_${step}/${sub}" "$run_dir/final_hf"
  [[ -f "$run_dir/final_hf/config.json" ]] || { echo "no Hugging Face weights in $run_dir/final_hf (was hf_model saved?)" >&2; return 1; }
  echo "$run_dir/final_hf -> global_step_${step}/${sub}"
}
