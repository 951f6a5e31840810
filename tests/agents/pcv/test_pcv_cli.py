"""`rubric-rl rollout`: a dry run starts nothing, bad definitions are exit 2, and a task whose endpoint fails stays
unfinished (recorded, no result) so that a rerun retries it."""

from __future__ import annotations

import asyncio
import json

from stub_server import Reply, StubOpenAIServer
from typer.testing import CliRunner

from rubric_rl.agents.pcv.config import load_rollout
from rubric_rl.agents.pcv.records import Turn
from rubric_rl.agents.pcv.run import RunState, read_records, run_rollout, select_tasks
from rubric_rl.cli import app

runner = CliRunner()


def test_dry_run_lists_the_work_and_starts_nothing(write_run, stub, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["rollout", str(write_run(stub.url)), "--out", str(out), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["task_ids"] == ["T-1", "T-2"] and plan["already_finished"] == 0 and plan["device"] == "cpu"
    assert plan["budgets"]["max_turns"] == 2 and stub.request_count == 0 and not out.exists()
    text = runner.invoke(app, ["rollout", str(write_run(stub.url)), "--out", str(out), "--dry-run"])
    assert "nothing is started" in text.output


def test_bad_definitions_are_exit_2(write_run, stub, tmp_path):
    bad = runner.invoke(app, ["rollout", str(write_run(stub.url, concurrency=0)), "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "field concurrency" in bad.output
    missing = runner.invoke(app, ["rollout", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    empty = runner.invoke(
        app, ["rollout", str(write_run(stub.url)), "--out", str(tmp_path / "o"), "--set", "tasks.ids=90-99"]
    )
    assert empty.exit_code == 2 and "keeps no task" in empty.output
    unset = runner.invoke(app, ["rollout", str(write_run(stub.url)), "--out", str(tmp_path / "o"), "--set", "x"])
    assert unset.exit_code == 2 and "dotted.key=value" in unset.output


def test_a_failing_endpoint_leaves_tasks_unfinished_for_a_rerun(write_run, tmp_path):
    out = tmp_path / "run"
    with StubOpenAIServer(lambda request: Reply(status=503), model="stub") as server:
        config = load_rollout(write_run(server.url, planner={"profile": False}))
        summary = asyncio.run(run_rollout(config, select_tasks(config), out))
    assert summary["unfinished"] == ["T-1", "T-2"] and summary["finished"] == 0
    turns = read_records(out / "turns.jsonl", Turn)
    assert [(t.task_id, t.endpoint_error) for t in turns] == [("T-1", "http_503"), ("T-2", "http_503")]
    assert turns[0].llm.attempts == 2  # retried once (max_retries: 1), then recorded
    state = RunState.read(out)
    assert state.done == [] and set(state.turns) == {"T-1", "T-2"}
    assert json.loads((out / "config.json").read_text())["rollout"]["name"] == "cpu-e2e"


def test_a_cut_last_line_is_repaired(tmp_path):
    path = tmp_path / "turns.jsonl"
    turn = Turn(task_id="T", index=0, role="coder", kind="generate", started_at=0, seconds=1)
    path.write_text(turn.model_dump_json() + "\n" + turn.model_dump_json()[:40])
    assert len(read_records(path, Turn)) == 1 and path.read_text().endswith("}\n")


def test_bench_rollout_finds_the_level3_candidates(load_script):
    bench = load_script("bench_rollout")
    found = bench.candidates(["L3-1", "L3-2", "L3-3", "L3-4", "L3-33", "L3-34"])
    assert sorted(found) == ["L3-1", "L3-2", "L3-3", "L3-33", "L3-34"]
