#!/usr/bin/env bash
# The GPU check, in one script: environment, the gpu-marked tests (which build real CUDA extensions), and the
# benchmarks. Run on a GPU machine from the repository root:
#   bash scripts/gpu_check.sh [all|tests|sandbox|throughput|agreement|compare|reward] [benchmark arguments...]
# all runs tests, sandbox and throughput; the others run only when named:
#   agreement (bash scripts/gpu_check.sh agreement --n 5);
#   compare: the throughput benchmark's (b) and (c) on an older tree (OLD_TREE, default .device/old: e.g.
#     `git archive REV | tar -x -C .device/old`) and then on this one, on the same machine;
#   reward: scripts/bench_reward.py on cuda (a GRPO-shaped batch through the reward function and the executor).
# Env: PROBLEMS (the KernelBench task source the benchmarks read: a checkout, a problems.jsonl or hf:<dataset>;
# default .device/problems.jsonl), GPU_TEST_TIMEOUT (per test, s), PYTEST_K (a pytest -k expression selecting gpu
# tests), GPU_TEST_WORKERS (pytest-xdist processes running the gpu tests side by side; unset: one).
# Optional: .whl/ (wheels to install without an index, for a machine that has torch but not the rest;
# .whl/fallback/: numpy, installed only if missing). Logs and JSON results go under $OUT (or runs/gpu-check).
set -uo pipefail
phase=${1:-all}
case $phase in
  all|tests|sandbox|throughput|agreement|compare|reward) ;;
  *) echo "gpu_check.sh: unknown phase '$phase' (all|tests|sandbox|throughput|agreement|compare|reward)" >&2; exit 2 ;;
esac
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
OUT=${OUT:-runs/gpu-check}
PROBLEMS=${PROBLEMS:-.device/problems.jsonl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
# numpy (the host comparisons' loops) only where the machine's torch environment lacks it: never shadow its own.
if ! python3 -c "import numpy" 2>/dev/null && ls .whl/fallback/numpy-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/fallback/numpy-*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
export RUBRIC_RL_CACHE=${RUBRIC_RL_CACHE:-/tmp/rubric-rl-cache}
export RUBRIC_RL_TEST_CACHE=$RUBRIC_RL_CACHE/tests
status=0

{ nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
  nproc; python3 -c "import torch, pydantic, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), 'pydantic', pydantic.__version__, 'numpy', numpy.__version__)"
  nvcc --version | tail -1
  # The host under the timing cores: a launch-bound program's speedup follows its speed (Timings.host_*).
  lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU max MHz|Hypervisor)" || true
  grep -H . /sys/devices/system/cpu/cpu1[45]/topology/thread_siblings_list 2>/dev/null || true
  # Settings the machine gives every process but the sandbox's workers do not inherit (process._ENV_PASSTHROUGH):
  # a benchmark process timing beside them runs under these.
  env | grep -E "^(CUDA|TORCH|PYTORCH|OMP|MKL|NCCL|TRITON)[A-Z_]*=" | sort || true; } 2>&1 | tee "$OUT/env.txt"

if [[ $phase == all || $phase == tests ]]; then
  # Side by side, every xdist process would run the module fixture that prebuilds all the test programs at
  # once, inside its first test's time limit: on a cold cache the first four tests hit the 300 s limit on the
  # H200 host. The fixtures are set up once here first, in one process (the builds then come from the cache).
  if [[ -n ${GPU_TEST_WORKERS:-} ]]; then
    python3 -m pytest -m gpu tests/sandbox -q -p no:cacheprovider -o addopts="" --setup-only --timeout 900 \
      ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | stamp | tail -5
  fi
  # The gpu-marked tests, and those that rely on torch internals (on this machine's torch, not CI's). Per-test
  # limit (signal method: the test fails and the run goes on; the builder kills its compile jobs).
  python3 -m pytest -m "gpu or torch_internals" tests/sandbox -v -p no:cacheprovider -o addopts="" -rA --timeout "${GPU_TEST_TIMEOUT:-300}" \
    --timeout-method signal --durations 0 ${PYTEST_K:+-k "$PYTEST_K"} ${GPU_TEST_WORKERS:+-n "$GPU_TEST_WORKERS"} 2>&1 | stamp | tee "$OUT/pytest_gpu.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  # The build logs and records (small): what each build did and how long its steps took.
  (cd "$RUBRIC_RL_TEST_CACHE" 2>/dev/null && tar czf "$OUT/test_builds.tgz" --ignore-failed-read \
    ext/*/job.log ext/*/.ninja_log ext/*/build.json 2>/dev/null)
fi
if [[ $phase == all || $phase == sandbox ]]; then
  python3 scripts/bench_sandbox.py --problems "$PROBLEMS" --out "$OUT/bench_sandbox.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_sandbox.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if [[ $phase == all || $phase == throughput ]]; then
  python3 scripts/bench_throughput.py --problems "$PROBLEMS" --out "$OUT/bench_throughput.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_throughput.log" | tail -60
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if [[ $phase == agreement ]]; then
  python3 scripts/bench_agreement.py --problems "$PROBLEMS" --out "$OUT/bench_agreement.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_agreement.log" | tail -30
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
if [[ $phase == compare ]]; then
  old=${OLD_TREE:-.device/old}
  problems=$(realpath "$PROBLEMS")
  for tree in "$old" .; do
    name=$([[ $tree == . ]] && echo new || echo old)
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD python3 scripts/bench_throughput.py --problems "$problems" \
      --skip a,cuts --cv-candidates 0 --out "$OUT/bench_throughput_$name.json" "${@:2}") \
      2>&1 | stamp | tee "$OUT/bench_throughput_$name.log" | tail -25
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
  done
fi
if [[ $phase == reward ]]; then
  python3 scripts/bench_reward.py --device cuda --problems "$PROBLEMS" --out "$OUT/bench_reward.json" "${@:2}" \
    2>&1 | stamp | tee "$OUT/bench_reward.log" | tail -40
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
exit $status
