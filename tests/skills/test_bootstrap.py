"""--bootstrap: the bundled candidates evaluated on the cpu backend (real C++ builds), then refine rows."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rubric_rl.cli import app
from rubric_rl.skills.ledger import read_verdicts_file

pytestmark = pytest.mark.slow


def test_bootstrap_evaluates_the_bundled_candidates_and_resumes(examples_dir, build_cache, tmp_path):
    sandbox = tmp_path / "sandbox.yaml"
    sandbox.write_text(
        f"timing: {{trials: 5, warmup_trials: 1, compile_baseline: false}}\nbuild: {{cache_dir: {build_cache}}}\n"
    )
    out = tmp_path / "ds"
    args = ["skills", "build", "--tasks", str(examples_dir / "tasks.jsonl"), "--skill", "refine", "--bootstrap",
            "--backend", "cpu", "--sandbox-config", str(sandbox), "--out", str(out), "--val-fraction", "0",
            "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.output)
    evaluations = manifest["sources"]["evaluations"]
    assert evaluations["kind"] == "bootstrap" and evaluations["evaluated"] == 3
    statuses = {e.verdict.status for e in read_verdicts_file(out / "bootstrap_verdicts.jsonl")}
    assert statuses == {"correct", "incorrect", "compile_error"}
    # the correct one was not timed against torch.compile: nothing says it needs refining
    assert manifest["counts"]["by_skill"]["train"] == {"refine": 2}
    assert manifest["dropped"]["nothing_to_refine"] == 1

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["sources"]["evaluations"]["already_done"] == 3
