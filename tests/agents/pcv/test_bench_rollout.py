"""scripts/bench_rollout.py cut short by a time limit (``gpu_check.sh``'s BUDGET_S sends SIGTERM) still writes
its report and bench.json for the tasks that finished, says the run is incomplete, and leaves no worker."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from child_env import REPO, child_env

# A Level 3 task with the id of the repository's L3-1 candidate: the scripted coder answers with that CUDA
# program, which the cpu backend cannot build, turn after turn, so the run is still going when the signal comes.
REFERENCE = (
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
    "def get_inputs():\n    return [torch.randn(64)]\n\n\ndef get_init_inputs():\n    return []\n"
)


@pytest.mark.slow
def test_a_cut_run_reports_what_finished(tmp_path: Path, build_cache: Path) -> None:
    tasks = tmp_path / "problems.jsonl"
    tasks.write_text(json.dumps({"level": 3, "problem_id": 1, "name": "1_MLP", "code": REFERENCE}) + "\n")
    out = tmp_path / "bench"
    cmd = [sys.executable, str(REPO / "scripts" / "bench_rollout.py"), "--tasks", str(tasks), "--ids", "1",
           "--device", "cpu", "--out", str(out), "--max-turns", "40", "--concurrency", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=child_env(RUBRIC_RL_CACHE=str(build_cache)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        turns = out / "run" / "turns.jsonl"
        deadline = time.monotonic() + 240
        while not (turns.exists() and turns.read_text().count("\n") >= 2):  # the planner and a coder turn
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
            time.sleep(0.5)
        workers = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # as timeout does: the process, then its group
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-3000:]
    assert "interrupted: reporting the tasks that finished" in output and "Traceback" not in output
    bench = json.loads((out / "bench.json").read_text())
    assert bench["complete"] is False and bench["finished"] == 0 and bench["tasks"] == 1
    assert (out / "report" / "report.md").exists()
    assert [p.pid for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
