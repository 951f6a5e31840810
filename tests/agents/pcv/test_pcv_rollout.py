"""End to end on the cpu backend: `rubric-rl rollout` in a child process against a scripted OpenAI-protocol server
whose coder first answers with a program that does not compile and, once it is shown the Verifier's feedback,
with a correct one. The run is killed (SIGKILL) in the middle of a turn and run again: it recovers, resumes
without losing or redoing a recorded turn, and the report's numbers match the records."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from child_env import child_env
from pcv_fixtures import ScriptedRoles, role_of, task_of
from stub_server import StubOpenAIServer
from typer.testing import CliRunner

from rubric_rl.agents.pcv.records import TaskResult, Turn
from rubric_rl.cli import app

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]


def _rollout_cmd(run: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "rubric_rl.cli", "rollout", str(run), "--out", str(out), "--json"]


def _env(build_cache: Path) -> dict[str, str]:
    env = child_env(RUBRIC_RL_CACHE=str(build_cache))
    env.pop("OPENAI_API_KEY", None)
    return env


def _records(path: Path, model):
    return [model.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(predicate, timeout_s: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the rollout ended early: {proc.stderr.read().decode()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError("timed out waiting for the rollout")


def test_rollout_recovers_resumes_after_kill_and_reports_its_records(write_run, build_cache, tmp_path):
    out = tmp_path / "run"
    with StubOpenAIServer(ScriptedRoles(refine_delay_s=3.0), model="stub") as server:
        run = write_run(server.url)
        proc = subprocess.Popen(
            _rollout_cmd(run, out), env=_env(build_cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

        def first_coder_turn_written() -> bool:
            path = out / "turns.jsonl"
            return path.exists() and '"role":"coder"' in path.read_text()

        _wait_for(first_coder_turn_written, 400, proc)
        _wait_for(lambda: any(role_of(r) == "refine" for r in server.requests), 60, proc)
        os.kill(proc.pid, signal.SIGKILL)  # in the middle of the refine turn: the server is still answering
        proc.wait()
        killed = _records(out / "turns.jsonl", Turn)
        assert [(t.task_id, t.kind) for t in killed] == [("T-1", "plan"), ("T-1", "generate")]
        assert not (out / "results.jsonl").read_text().strip()

        again = subprocess.run(
            _rollout_cmd(run, out), env=_env(build_cache), capture_output=True, text=True, timeout=900
        )
        assert again.returncode == 0, again.stderr[-3000:]
        summary = json.loads(again.stdout)
        requests = list(server.requests)

    assert summary["finished"] == 2 and summary["correct"] == 2 and summary["unfinished"] == []
    turns = _records(out / "turns.jsonl", Turn)
    results = {r.task_id: r for r in _records(out / "results.jsonl", TaskResult)}
    # nothing lost, nothing redone: each task's turns once each, in order
    for task_id in ("T-1", "T-2"):
        mine = [t for t in turns if t.task_id == task_id]
        assert [t.index for t in mine] == [0, 1, 2]
        assert [t.kind for t in mine] == ["plan", "generate", "refine"]
    asked = Counter((task_of(r), role_of(r)) for r in requests)
    assert asked[("T-1", "planner")] == 1 and asked[("T-1", "generate")] == 1
    assert asked[("T-1", "refine")] == 2  # the one in flight at the kill, asked again; recorded once
    assert asked[("T-2", "planner")] == asked[("T-2", "generate")] == asked[("T-2", "refine")] == 1

    # the loop recovered: broken program, its feedback, the fixed program
    plan, generate, refine = (t for t in turns if t.task_id == "T-1")
    assert plan.plan is not None and plan.profile is not None and plan.profile.error is None
    assert plan.profile.ops and plan.stages["profile_s"] > 0
    assert generate.verdict.status == "compile_error" and "## Compilation" in generate.feedback
    assert refine.refined_turn == 1 and refine.verdict.status == "correct"
    refine_prompt = next(r for r in requests if task_of(r) == "T-1" and role_of(r) == "refine")
    user = refine_prompt["messages"][1]["content"]
    assert generate.feedback in user and "The Planner's plan" in user and "missing semicolon" in user
    assert "## Optimisation guidance" in refine.feedback and refine.citations
    assert set(refine.stages) == {"coder_llm_s", "sandbox_s", "verifier_s"}
    for r in results.values():
        assert r.status == "correct" and r.statuses == ["compile_error", "correct"]
        assert r.first_correct_turn == 2 and r.best_turn == 2 and r.stop_reason == "max_turns"
        assert r.tokens == sum(t.tokens for t in turns if t.task_id == r.task_id) == 1050 + 1600 + 2100
        assert r.verdict.speedup_eager is not None and r.track == "own_kernels"

    # the report's numbers are the records'
    report = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", str(out), "--out", str(report), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads((report / "summary.json").read_text())
    (run_summary,) = data["runs"]
    m = run_summary["tracks"]["own_kernels"]
    speedups = [r.verdict.speedup_eager for r in results.values()]
    assert m["tasks"] == 2 and m["correct_rate"] == 1.0 and m["fast_p"]["eager"]["0"] == 1.0
    assert m["geomean_speedup"]["eager"] == pytest.approx(math.exp(sum(map(math.log, speedups)) / 2))
    assert m["fast_p"]["eager"]["1"] == sum(s > 1 for s in speedups) / 2
    assert m["turns_to_first_correct"]["mean"] == 2.0
    assert m["failures"]["turn_status"] == {"compile_error": 2, "correct": 2}
    rows = {row["task_id"]: row for row in run_summary["problems"]}
    assert {k: rows[k]["speedup_eager"] for k in rows} == {k: r.verdict.speedup_eager for k, r in results.items()}
    for name in ("report.md", "report.html", "plots/speedup_distribution.png", "plots/fast_p.png"):
        assert (report / name).exists()
