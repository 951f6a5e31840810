#!/usr/bin/env bash
# The GPU check, in one script: environment, the gpu-marked tests (which build real CUDA extensions), and the
# benchmarks. Run on a GPU machine from the repository root:
#   bash scripts/gpu_check.sh PHASES [benchmark arguments...]
# PHASES is one phase or several joined by commas (tests,agents,rollout); arguments go to a lone phase only.
# all runs tests, sandbox and throughput; the others run only when named:
#   agreement (bash scripts/gpu_check.sh agreement --n 5);
#   compare: the throughput benchmark's (b) and (c) on COMPARE_N candidates (default 16), on an older tree
#     (OLD_TREE, default .device/old: e.g. `git archive REV | tar -x -C .device/old`) and on this one (NEW_TREE), in the
#     order COMPARE_ORDER (default old,new,new,old), then new / old of the mean wall per mode (compare.log);
#   reward: scripts/bench_reward.py on cuda (a GRPO-shaped batch through the reward function and the executor);
#   recipe: the reward path of a recipe on cuda (RECIPE, default recipes/one-gpu-try/recipe.yaml: its own
#     reward_kwargs through the reward function, 2 tasks x 8 responses);
#   agents: scripts/bench_agent_tools.py on cuda (tool latencies, a 10-turn trajectory; AGENT_TASK, default L1-19);
#   rollout: scripts/bench_rollout.py, a Planner/Coder/Verifier run over Level 3 (ROLLOUT_IDS, default 1-8,33,34);
#   synth: rubric-rl tasks synth on cuda, the filters of SYNTH_N (default 200) candidates with one probe worker.
# Env: PROBLEMS (the KernelBench task source the benchmarks read: a checkout, a problems.jsonl or hf:<dataset>;
# default .device/problems.jsonl), GPU_TEST_TIMEOUT (per test, s), PYTEST_K (a pytest -k expression selecting gpu
# tests), GPU_TEST_WORKERS (pytest-xdist processes running the gpu tests side by side; unset: one), BUDGET_S (the
# seconds all the phases may take: each runs under what is left, and a phase with under a minute left is skipped).
# Optional: WHEELS (default .whl/: wheels to install without an index, for a machine that has torch but not the
# rest; its fallback/: numpy, installed only if missing). Logs and JSON results go under $OUT (or runs/gpu-check);
# BUNDLE=1 packs them at the end into $OUT/gpu-check.tgz, leaving beside it only the top-level logs, env.txt and
# skipped.txt (for a runner that brings back few files: a rollout's report alone is a dozen).
set -uo pipefail
PHASES="all tests sandbox throughput agreement compare reward recipe agents rollout synth"
IFS=, read -ra phases <<< "${1:-all}"
for p in "${phases[@]}"; do
  [[ " $PHASES " == *" $p "* ]] || { echo "gpu_check.sh: unknown phase '$p' (${PHASES// /|})" >&2; exit 2; }
done
IFS=, read -ra order <<< "${COMPARE_ORDER:-old,new,new,old}"
for name in "${order[@]}"; do
  [[ $name == old || $name == new ]] || { echo "gpu_check.sh: COMPARE_ORDER names old and new only, not '$name'" >&2; exit 2; }
done
(( ${#phases[@]} == 1 )) || (( $# <= 1 )) || { echo "gpu_check.sh: benchmark arguments go with one phase only" >&2; exit 2; }
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
OUT=${OUT:-runs/gpu-check}
PROBLEMS=${PROBLEMS:-.device/problems.jsonl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
WHEELS=${WHEELS:-.whl}
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 1
fi
# numpy (the host comparisons' loops) only where the machine's torch environment lacks it: never shadow its own.
if ! python3 -c "import numpy" 2>/dev/null && ls "$WHEELS"/fallback/numpy-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/fallback/numpy-*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
export RUBRIC_RL_CACHE=${RUBRIC_RL_CACHE:-/tmp/rubric-rl-cache}
export RUBRIC_RL_TEST_CACHE=$RUBRIC_RL_CACHE/tests
status=0
started=$SECONDS
bundle() {
  [[ ${BUNDLE:-} == 1 ]] || return 0
  local packed
  packed=$(mktemp --suffix .tgz) && tar czf "$packed" -C "$OUT" . && mv "$packed" "$OUT/gpu-check.tgz" \
    && find "$OUT" -mindepth 1 -maxdepth 1 ! -name gpu-check.tgz ! -name '*.log' ! -name env.txt ! -name skipped.txt \
      -exec rm -rf {} +
}
trap bundle EXIT
# wants PHASE: PHASE was asked for (all stands for tests, sandbox and throughput) and time is left for it.
wants() {
  local p hit=0
  for p in "${phases[@]}"; do
    [[ $p == "$1" || ($p == all && " tests sandbox throughput " == *" $1 "*) ]] && hit=1
  done
  (( hit )) || return 1
  if [[ -n ${BUDGET_S:-} ]] && (( BUDGET_S - (SECONDS - started) < 60 )); then
    echo "gpu_check.sh: $1 skipped, $(( BUDGET_S - (SECONDS - started) )) s of BUDGET_S left" | tee -a "$OUT/skipped.txt"
    status=1
    return 1
  fi
}
# limited CMD...: CMD under the time BUDGET_S leaves (none set: no limit), killed with its process group.
limited() {
  if [[ -n ${BUDGET_S:-} ]]; then
    timeout --kill-after 20 $(( BUDGET_S - (SECONDS - started) - 10 )) "$@"
  else
    "$@"
  fi
}

{ nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
  nproc; python3 -c "import torch, pydantic, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), 'pydantic', pydantic.__version__, 'numpy', numpy.__version__)"
  nvcc --version | tail -1
  # The host under the timing cores: a launch-bound program's speedup follows its speed (Timings.host_*).
  lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU max MHz|Hypervisor)" || true
  grep -H . /sys/devices/system/cpu/cpu1[45]/topology/thread_siblings_list 2>/dev/null || true
  # Settings the machine gives every process but the sandbox's workers do not inherit (process._ENV_PASSTHROUGH):
  # a benchmark process timing beside them runs under these.
  env | grep -E "^(CUDA|TORCH|PYTORCH|OMP|MKL|NCCL|TRITON)[A-Z_]*=" | sort || true; } 2>&1 | tee "$OUT/env.txt"

if wants tests; then
  # Side by side, every xdist process would run the module fixture that prebuilds all the test programs at
  # once, inside its first test's time limit: on a cold cache the first four tests hit the 300 s limit on the
  # H200 host. The fixtures are set up once here first, in one process (the builds then come from the cache).
  if [[ -n ${GPU_TEST_WORKERS:-} ]]; then
    limited python3 -m pytest -m gpu tests/sandbox -q -p no:cacheprovider -o addopts="" --setup-only --timeout 900 \
      ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | stamp | tail -5
  fi
  # The gpu-marked tests, and those that rely on torch internals (on this machine's torch, not CI's). Per-test
  # limit (signal method: the test fails and the run goes on; the builder kills its compile jobs).
  limited python3 -m pytest -m "gpu or torch_internals" tests/sandbox -v -p no:cacheprovider -o addopts="" -rA --timeout "${GPU_TEST_TIMEOUT:-300}" \
    --timeout-method signal --durations 0 ${PYTEST_K:+-k "$PYTEST_K"} ${GPU_TEST_WORKERS:+-n "$GPU_TEST_WORKERS"} 2>&1 | stamp | tee "$OUT/pytest_gpu.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  # The build logs and records (small): what each build did and how long its steps took.
  (cd "$RUBRIC_RL_TEST_CACHE" 2>/dev/null && tar czf "$OUT/test_builds.tgz" --ignore-failed-read \
    ext/*/job.log ext/*/.ninja_log ext/*/build.json 2>/dev/null)
fi
if wants sandbox; then
  limited python3 scripts/bench_sandbox.py --problems "$PROBLEMS" --out "$OUT/bench_sandbox.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_sandbox.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants throughput; then
  limited python3 scripts/bench_throughput.py --problems "$PROBLEMS" --out "$OUT/bench_throughput.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_throughput.log" | tail -60
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants agreement; then
  limited python3 scripts/bench_agreement.py --problems "$PROBLEMS" --out "$OUT/bench_agreement.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_agreement.log" | tail -30
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants compare; then
  problems=$(realpath "$PROBLEMS")
  declare -A runs=()
  for name in "${order[@]}"; do
    runs[$name]=$(( ${runs[$name]:-0} + 1 ))
    tree=$([[ $name == new ]] && echo "${NEW_TREE:-.}" || echo "${OLD_TREE:-.device/old}")
    run=bench_throughput_$name${runs[$name]}
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD limited python3 scripts/bench_throughput.py --problems "$problems" \
      --skip a,cuts --cv-candidates 0 --n "${COMPARE_N:-16}" --out "$OUT/$run.json" "${@:2}") \
      2>&1 | stamp | tee "$OUT/$run.log" | tail -12
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  done
  python3 scripts/compare_throughput.py "$OUT"/bench_throughput_{old,new}[0-9]*.json \
    --out "$OUT/compare.json" 2>&1 | tee "$OUT/compare.log" || status=1
fi
if wants reward; then
  limited python3 scripts/bench_reward.py --device cuda --problems "$PROBLEMS" --out "$OUT/bench_reward.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_reward.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants recipe; then
  recipe=${RECIPE:-recipes/one-gpu-try/recipe.yaml}
  limited python3 scripts/bench_reward.py --device cuda --problems "$PROBLEMS" --recipe "$recipe" --skip exec \
    --tasks 2 --k 8 --workers 4 --out "$OUT/bench_recipe_reward.json" "${@:2}" 2>&1 | stamp | tee "$OUT/bench_recipe_reward.log" | tail -25
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants agents; then
  limited python3 scripts/bench_agent_tools.py --device cuda --problems "$PROBLEMS" --task "${AGENT_TASK:-L1-19}" \
    --out "$OUT/bench_agent_tools.json" "${@:2}" 2>&1 | stamp | tee "$OUT/bench_agent_tools.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants rollout; then
  limited python3 scripts/bench_rollout.py --tasks "$PROBLEMS" --ids "${ROLLOUT_IDS:-1-8,33,34}" --device cuda \
    --max-turns 2 --concurrency 4 --out "$OUT/bench-rollout" "${@:2}" 2>&1 | stamp | tee "$OUT/bench_rollout.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if wants synth; then
  # One probe worker: its runtime measurements are the filter's, undisturbed by a second probe. The funnel rows
  # are written as candidates finish, so a run cut by BUDGET_S still tells the share of each filter.
  n=${SYNTH_N:-200}
  limited python3 -m rubric_rl.cli tasks synth --n "$n" --max-candidates "$n" --device cuda --no-compile --workers 1 \
    --kernelbench "$PROBLEMS" --out "$OUT/synth/tasks.jsonl" "${@:2}" 2>&1 | stamp | tee "$OUT/synth.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
exit $status
