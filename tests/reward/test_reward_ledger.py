"""The ledger: every scored sample appended as a RewardRecord; recomputing a stored run gives the same numbers,
and another config gives another scheme's numbers without new rollouts. The scorer runs on a scripted executor
here (Verdicts named in the program's first line) and the offline judge; the sandbox is exercised in
test_reward_verl."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rubric_rl.cli import app
from rubric_rl.judge import make_judge
from rubric_rl.reward import GroupBoard, LedgerWriter, RewardConfig, read_ledger, recompute
from rubric_rl.reward.metrics import JsonlSink, RewardMetrics, WandbSink, summarize
from rubric_rl.reward.scorer import RewardScorer, SampleInfo
from rubric_rl.sandbox import Verdict
from rubric_rl.sandbox.executors import Executor, infra_verdict
from rubric_rl.tasks import Task


class ScriptedExecutor(Executor):
    """Returns the Verdict the program's first line names: ``# status eager compile [infra]``."""

    def __init__(self) -> None:
        self.calls = 0

    async def _evaluate(self, task: Task, program: str, *, deadline_s: float | None = None) -> Verdict:
        self.calls += 1
        status, eager, compile_, *infra = program.splitlines()[0].lstrip("# ").split()
        if infra:
            return infra_verdict(task, program, " ".join(infra))
        num = lambda s: None if s == "-" else float(s)  # noqa: E731
        return Verdict.model_validate(
            {
                "status": status,
                "task_id": task.id,
                "candidate_sha256": "0" * 64,
                "speedup_eager": num(eager),
                "speedup_compile": num(compile_),
            }
        )

    def stats(self) -> dict[str, Any]:
        return {"calls": self.calls}


def response(head: str, body: str) -> str:
    return f"Done.\n\n```python\n# {head}\n{body}```\n"


GROUPS = {  # group id -> heads of its samples (each response holds the correct candidate's body)
    "g1": ["correct 2.0 1.5", "incorrect - -", "hack - -", "correct 1.2 0.9 lost the GPU"],
    "g2": ["correct 1.06 1.2", "compile_error - -", None, "correct 0.8 0.5"],  # None: no program at all
}


@pytest.fixture
def scored_run(tmp_path: Path, reference: str, responses: dict[str, str]) -> tuple[Path, RewardConfig, list]:
    body = responses["correct"].split("```python\n", 1)[1].split("```")[0]
    config = RewardConfig.load({"ledger": {"dir": str(tmp_path / "run")}, "judge": {"offline": True, "cache": False}})
    scorer = RewardScorer(
        config,
        ScriptedExecutor(),
        make_judge(config.judge),
        board=GroupBoard(RewardMetrics(4, [JsonlSink(tmp_path / "run" / "ledger" / "metrics.jsonl")])),
        ledger=LedgerWriter(tmp_path / "run", config),
    )

    async def run():
        jobs = []
        for gid, heads in GROUPS.items():
            for i, head in enumerate(heads):
                text = responses["unparsable"] if head is None else response(head, body)
                info = SampleInfo(task_id="fused", skill="generate" if gid == "g1" else "refine", index=i)
                if gid == "g2":
                    info = info.model_copy(update={"previous": body, "feedback": "make it faster"})
                jobs.append(
                    scorer.score(
                        data_source="cpu_demo",
                        response=text,
                        reference=reference,
                        info=info,
                        prompt=[{"role": "user", "content": "write ModelNew"}],
                        group_id=gid,
                        group_size=len(heads),
                    )
                )
        return await asyncio.gather(*jobs)

    return tmp_path / "run", config, asyncio.run(run())


def test_scores_masking_and_the_ledger(scored_run) -> None:
    run_dir, config, records = scored_run
    by_head = dict(zip([h for hs in GROUPS.values() for h in hs], records, strict=True))
    lost = by_head["correct 1.2 0.9 lost the GPU"]
    assert lost.masked and lost.mask_reason == "infra: lost the GPU" and lost.own_score is None
    g1_peers = [r for r in records[:3]]
    assert lost.score == pytest.approx(sum(r.score for r in g1_peers) / 3)
    assert sorted(lost.group_peers or []) == sorted(r.sample_id for r in g1_peers)
    assert by_head["hack - -"].score == config.hack_penalty
    assert by_head["incorrect - -"].score == 0.0
    no_program = by_head[None]
    assert no_program.verdict.status == "compile_error" and no_program.program is None
    assert no_program.extraction_error and "no program in the response" in no_program.verdict.errors[0]
    stored = list(read_ledger(run_dir))
    assert sorted(r.sample_id for r in stored) == sorted(r.sample_id for r in records)
    assert stored[0].prompt == [{"role": "user", "content": "write ModelNew"}]
    windows = [json.loads(line) for line in (run_dir / "ledger" / "metrics.jsonl").read_text().splitlines()]
    assert len(windows) == 2 and windows[0]["metrics"]["reward/all/samples"] == 4.0


def test_recompute_gives_the_same_numbers(scored_run) -> None:
    run_dir, config, records = scored_run
    stored = list(read_ledger(run_dir))
    again = recompute(stored, config)
    assert [r.score for r in again] == [r.score for r in stored]  # exactly
    assert [r.masked for r in again] == [r.masked for r in stored]


def test_recompute_under_another_scheme(scored_run) -> None:
    run_dir, _, _ = scored_run
    milestone = RewardConfig.load({"rule": {"name": "milestone"}, "mix": {"name": "none"}})
    by_sha = {r.sample_id: r for r in recompute(list(read_ledger(run_dir)), milestone)}
    scores = sorted(r.score for r in by_sha.values() if not r.masked)
    # incorrect, hack, compile error, no program; 0.8x; 2.0x and 1.06x over eager and compile
    assert scores == [-1.0, -1.0, -1.0, -1.0, 1.0, 3.0, 3.0]
    masked = [r for r in by_sha.values() if r.masked]
    assert len(masked) == 1 and masked[0].score == pytest.approx((3.0 - 1.0 - 1.0) / 3)


def test_recompute_cli(scored_run, tmp_path: Path, write_yaml) -> None:
    run_dir, _, records = scored_run
    runner = CliRunner()
    same = runner.invoke(app, ["reward", "recompute", str(run_dir), "--json"])
    assert same.exit_code == 0, same.output
    result = json.loads(same.output)
    assert result["samples"] == len(records) and result["changed"] == 0
    other = write_yaml(tmp_path / "milestone.yaml", {"rule": {"name": "milestone"}, "mix": {"name": "none"}})
    out = tmp_path / "recomputed.jsonl"
    diff = runner.invoke(app, ["reward", "recompute", str(run_dir), "--config", str(other), "--out", str(out)])
    assert diff.exit_code == 0, diff.output
    assert "cpu_demo" in diff.output and "score(s) changed" in diff.output
    assert len(list(read_ledger(out))) == len(records)
    bad = write_yaml(tmp_path / "bad.yaml", {"rule": {"name": "milestone"}})
    failed = runner.invoke(app, ["reward", "recompute", str(run_dir), "--config", str(bad)])
    assert failed.exit_code == 2 and "mix.name" in failed.output


def test_metrics_summary_and_wandb_offline(tmp_path: Path) -> None:
    rows = [
        {"data_source": "a", "score": 2.0, "components": {"rule": 1.5}, "compiled": True, "correct": True},
        {"data_source": "a", "score": 0.0, "components": {"rule": 0.0}, "compiled": True},
        {"data_source": "b", "score": -1.0, "components": {"hack_penalty": -1.0}, "compiled": True, "hack": True},
        {"data_source": "b", "score": 0.5, "components": {}, "masked": True, "judge_failed": True},
    ]
    m = summarize(rows)
    assert m["reward/a/score/mean"] == 1.0 and m["reward/a/rule/mean"] == 0.75
    assert m["reward/b/hack_rate"] == 0.5 and m["reward/b/judge_failed_rate"] == 0.5
    assert m["reward/all/compiled_rate"] == 0.75 and m["reward/b/score_unmasked/mean"] == -1.0
    pytest.importorskip("wandb")
    sink = WandbSink("rubric-rl-test", "g", "offline", tmp_path, {"mix": "none"})
    metrics = RewardMetrics(2, [sink])
    for row in rows:
        metrics.add(row)
    metrics.close()
    assert metrics.step == 2
    assert list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
