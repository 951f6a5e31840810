#!/usr/bin/env bash
# cuda-agent-staged: CUDA Agent's schedule, one stage per call (README.md beside this file).
#
#   bash recipes/cuda-agent-staged/run.sh 1          # single-turn RL warm-up (milestone reward)
#   bash recipes/cuda-agent-staged/run.sh rft-data   # stage 1's ledger -> the RFT parquet (once, on one node)
#   bash recipes/cuda-agent-staged/run.sh 2          # rejection fine-tuning (torchrun: on every node of stage 2)
#   bash recipes/cuda-agent-staged/run.sh 3          # critic warm-up (trainer.critic_warmup, frozen actor)
#   bash recipes/cuda-agent-staged/run.sh 4          # PPO, resuming stage 3's checkpoint
#
# Each stage is checked before it starts. The folders below are the ones the stage YAMLs name; change them in
# both places, or pass the same overrides to every stage. Anything after the stage is a Hydra override of it.
# Environment: SFT_NNODES (2), SFT_GPUS_PER_NODE (8) and MASTER_ADDR for stage 2; those of recipes/common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

HERE="$RECIPES_DIR/cuda-agent-staged"
STAGE1_DIR=runs/cuda-agent/stage1_warmup    # stage1_warmup.yaml: trainer.default_local_dir (and the ledger)
RFT_DATA=data/cuda-agent/rft                # stage2_rft.yaml: data.train_files = $RFT_DATA/train.parquet
STAGE2_DIR=runs/cuda-agent/stage2_rft       # stage2_rft.yaml: trainer.default_local_dir
PPO_DIR=runs/cuda-agent/stage3_4_ppo        # ppo_agent.yaml: trainer.default_local_dir (stages 3 and 4)

stage="${1:?usage: run.sh 1|rft-data|2|3|4 [overrides...]}"
shift
case "$stage" in
  1)
    check "$HERE/stage1_warmup.yaml" "$STAGE1_DIR" "$@"
    run_ppo "$HERE/stage1_warmup.yaml" "$@"
    link_final "$STAGE1_DIR" actor/huggingface
    ;;
  rft-data)
    # The filter (positive reward, not masked, no hack finding, no judge failure, not a copy of the reference)
    # is the datasets' command (rubric-rl skills sft); it writes $RFT_DATA/train.parquet with a messages column.
    rubric_rl skills sft --from-ledger "$STAGE1_DIR" --out "$RFT_DATA" "$@"
    ;;
  2)
    nnodes="${SFT_NNODES:-2}" gpus="${SFT_GPUS_PER_NODE:-8}"
    check "$HERE/stage2_rft.yaml" "$STAGE2_DIR" trainer.nnodes="$nnodes" trainer.n_gpus_per_node="$gpus" "$@"
    run_sft "$HERE/stage2_rft.yaml" "$nnodes" "$gpus" "$@"
    link_final "$STAGE2_DIR" huggingface
    ;;
  3)
    check "$HERE/stage3_critic.yaml" "$PPO_DIR" "$@"
    run_ppo "$HERE/stage3_critic.yaml" "$@"
    ;;
  4)
    check "$HERE/stage4_ppo.yaml" "$PPO_DIR" "$@"
    run_ppo "$HERE/stage4_ppo.yaml" "$@"
    link_final "$PPO_DIR" actor/huggingface
    ;;
  *)
    echo "unknown stage $stage: 1, rft-data, 2, 3 or 4" >&2
    exit 2
    ;;
esac
