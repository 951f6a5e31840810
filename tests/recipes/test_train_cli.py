"""``rubric-rl train``: prints the resolved config and the exact launch command, refuses to launch on any error,
writes the resolved config beside the run."""

from __future__ import annotations

import json

import pytest
import yaml
from child_env import python_path
from recipe_fixtures import recipe_overrides
from typer.testing import CliRunner

from rubric_rl.cli import app

runner = CliRunner()


@pytest.fixture
def overrides(verl_installed, tiny_model, data_dir, judge_server) -> list[str]:
    return recipe_overrides("one-gpu-try", tiny_model, data_dir, judge_server.url)


def test_dry_run_prints_config_findings_and_the_launch_command(overrides, tmp_path):
    result = runner.invoke(app, ["train", "one-gpu-try", *overrides, "--dry-run", "--write-config", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "# resolved config of one-gpu-try/recipe" in out and "train_batch_size: 16" in out
    assert "ready to launch" in out
    command = out.split("launch command:")[1].strip()
    assert "-m verl.trainer.main_ppo --config-path" in command and "--config-name recipe" in command
    assert all(o.split("=")[0] in command for o in overrides)
    saved = yaml.safe_load((tmp_path / "resolved_config.yaml").read_text())
    assert saved["data"]["train_batch_size"] == 16 and "${" not in (tmp_path / "resolved_config.yaml").read_text()
    record = json.loads((tmp_path / "launch.json").read_text())
    assert record["overrides"] == overrides and record["command"][1:3] == ["-m", "verl.trainer.main_ppo"]


def test_a_failing_check_exits_1_and_launches_nothing(overrides, monkeypatch):
    import rubric_rl.recipes as recipes

    launched = []
    monkeypatch.setattr(recipes, "launch", lambda command: launched.append(command) or 0)
    result = runner.invoke(app, ["train", "one-gpu-try", *overrides, "data.train_batch_size=12", "--json"])
    assert result.exit_code == 1 and not launched
    report = json.loads(result.output)
    assert not report["ok"] and "actor_rollout_ref.actor.ppo_mini_batch_size" in {f["key"] for f in report["findings"]}


def test_launching_here_needs_the_engine_and_gpus(overrides, monkeypatch):
    """On this CPU machine a real launch is refused, naming what is missing; a dry run only warns."""
    import importlib.util

    import rubric_rl.recipes as recipes

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    launched = []
    monkeypatch.setattr(recipes, "launch", lambda command: launched.append(command) or 0)
    result = runner.invoke(app, ["train", "one-gpu-try", *overrides, "--json"])
    assert result.exit_code == 1 and not launched
    errors = {f["key"] for f in json.loads(result.output)["findings"] if f["level"] == "error"}
    assert "actor_rollout_ref.rollout.name" in errors and "trainer.n_gpus_per_node" in errors


def test_sft_stage_launches_with_torchrun(verl_installed, tiny_model, data_dir, monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "node0")
    monkeypatch.delenv("MASTER_PORT", raising=False)
    result = runner.invoke(
        app,
        [
            "train",
            "cuda-agent-staged/stage2_rft",
            f"model.path={tiny_model}",
            f"data.train_files={data_dir / 'rft' / 'train.parquet'}",
            "--dry-run",
            "--json",
            "--no-show-config",
        ],
    )
    report = json.loads(result.output)
    rendezvous = ["--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500", "--nproc-per-node=8"]
    assert report["command"][:5] == ["torchrun", *rendezvous]
    assert "verl.trainer.sft_trainer" in report["command"] and report["config"] is None


def test_unknown_recipe_is_a_usage_error():
    result = runner.invoke(app, ["train", "no-such-recipe", "--dry-run"])
    assert result.exit_code == 2 and "bundled: " in result.output and "one-gpu-try" in result.output


def test_run_sh_checks_then_launches_main_ppo(verl_installed, tiny_model, data_dir, tmp_path):
    """The recipe's run.sh: pre-flight (resolved config written to the run folder), then verl's main_ppo with the
    same overrides. A stand-in python records the launch instead of starting Ray."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    shim = tmp_path / "python"
    shim.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ "$1 $2" == "-m verl.trainer.main_ppo" ]]; then printf "%s\\n" "$@" > "$LAUNCHED"; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    shim.chmod(0o755)
    run_dir = tmp_path / "run"
    env = {
        **os.environ,
        "PYTHON": str(shim),
        "LAUNCHED": str(tmp_path / "launched.txt"),
        "MODEL": str(tiny_model),
        "DATA_DIR": str(data_dir / "generate"),
        "RUN_DIR": str(run_dir),
        "PYTHONPATH": python_path(repo),
    }
    proc = subprocess.run(
        ["bash", str(repo / "recipes" / "one-gpu-try" / "run.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ready to launch" in proc.stdout
    launched = (tmp_path / "launched.txt").read_text().splitlines()
    assert launched[:4] == ["-m", "verl.trainer.main_ppo", "--config-path", str(repo / "recipes" / "one-gpu-try")]
    assert f"actor_rollout_ref.model.path={tiny_model}" in launched
    assert f"data.train_files=[{data_dir / 'generate' / 'train.parquet'}]" in launched
    assert yaml.safe_load((run_dir / "resolved_config.yaml").read_text())["trainer"]["default_local_dir"] == str(
        run_dir
    )
