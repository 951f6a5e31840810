import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_rl.cli import app

runner = CliRunner()


def test_help_lists_only_built_commands():
    out = runner.invoke(app, ["--help"]).output
    for cmd in ("tasks", "skills", "verify", "verify-batch", "judge", "train", "serve", "rollout", "report"):
        assert cmd in out
    for absent in ("score",):
        assert f" {absent} " not in out


def test_tasks_list_level3_of_the_real_problems(problems_file):
    result = runner.invoke(app, ["tasks", "list", "--source", str(problems_file), "--level", "3", "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert len(rows) == 50 and {r["level"] for r in rows} == {3}
    table = runner.invoke(app, ["tasks", "list", "--source", str(problems_file), "--level", "3"])
    assert "50 task(s)" in table.output and "1_MLP" in table.output


def test_tasks_bad_source_is_exit_2(tmp_path):
    result = runner.invoke(app, ["tasks", "list", "--source", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_verify_bad_usage_is_exit_2(tmp_path, examples_dir):
    cand = examples_dir / "fused_add_relu" / "candidate_correct.py"
    missing = runner.invoke(app, ["verify", str(tmp_path / "nope.py"), str(cand), "--device", "cpu"])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    bad_ref = tmp_path / "ref.py"
    bad_ref.write_text("class Model: pass\n")
    result = runner.invoke(app, ["verify", str(bad_ref), str(cand), "--device", "cpu"])
    assert result.exit_code == 2 and "get_inputs" in result.output
    bad_cfg = tmp_path / "cfg.yaml"
    bad_cfg.write_text("timing: {trials: -3}\n")
    ref = examples_dir / "fused_add_relu" / "reference.py"
    result = runner.invoke(app, ["verify", str(ref), str(cand), "--config", str(bad_cfg)])
    assert result.exit_code == 2 and "timing.trials" in result.output
    bad_cfg.write_text("perf_trials: 3\n")  # the flat layout before sections: refused with where it went
    result = runner.invoke(app, ["verify", str(ref), str(cand), "--config", str(bad_cfg)])
    assert result.exit_code == 2 and "'perf_trials' is now 'timing.trials'" in result.output


def test_skills_extract(tmp_path):
    good = tmp_path / "r.md"
    good.write_text("```python\nclass ModelNew:\n    pass\n```\n")
    result = runner.invoke(app, ["skills", "extract", str(good)])
    assert result.exit_code == 0 and "class ModelNew" in result.output
    bad = tmp_path / "b.md"
    bad.write_text("no code here")
    result = runner.invoke(app, ["skills", "extract", str(bad), "--json"])
    assert result.exit_code == 1 and json.loads(result.output)["error_code"] == "no_code"


@pytest.mark.slow
def test_verify_prints_a_verdict_and_exits_0_whatever_it_says(examples_dir, build_cache):
    ref = examples_dir / "fused_add_relu" / "reference.py"
    for name, status in (("candidate_correct.py", "correct"), ("candidate_wrong.py", "incorrect")):
        result = runner.invoke(
            app,
            [
                "verify",
                str(ref),
                str(examples_dir / "fused_add_relu" / name),
                "--device",
                "cpu",
                "--perf-trials",
                "5",
                "--no-compile",
                "--cache-dir",
                str(build_cache),
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["status"] == status


@pytest.mark.slow
def test_verify_batch_with_offline_judge(tmp_path: Path, examples_dir, build_cache):
    out = tmp_path / "run"
    args = [
        "verify-batch",
        "--tasks",
        str(examples_dir / "tasks.jsonl"),
        "--candidates",
        str(examples_dir / "candidates.jsonl"),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--perf-trials",
        "5",
        "--no-compile",
        "--cache-dir",
        str(build_cache),
        "--judge",
        "offline",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{") :])
    assert summary["status"] == {"compile_error": 1, "correct": 1, "incorrect": 1}
    rows = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert all(r["extras"]["judgment"]["identity"]["kind"] == "heuristic" for r in rows)
    assert (out / "config.json").exists() and (out / "summary.json").exists()
