"""The local executor under faults of its own: many slots parsing at once, an exception inside an evaluation."""

import asyncio
from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.executors import ExecutorConfig, make_executor
from rubric_rl.tasks import load_tasks

# Caught by the static checks: the evaluation is the parse and the checks alone (no build, no worker), so every
# slot parses at the same moment.
TORCH_IN_PYTHON = Path(__file__).resolve().parents[1] / "adversarial" / "cpu" / "torch_in_python.py"
# Nothing starts a worker: no spares, no baselines, no capture for prebuilds.
QUIET = ExecutorConfig(
    kind="local", cpu_slots=8, build_workers=2, spare_workers=0, reuse_baselines=False, prebuild=False
)


@pytest.fixture(scope="module")
def task(examples_dir: Path):
    return load_tasks(examples_dir / "tasks.jsonl")[0]


@pytest.mark.parametrize("attempt", range(3))
def test_many_slots_parsing_at_once(attempt, task, tmp_path):
    program = TORCH_IN_PYTHON.read_text()
    # Distinct texts (no cache can answer) that each parse for a while.
    programs = [program + "\n" + "\n".join(f"def _pad{i}_{k}(): return {k}" for k in range(400)) for i in range(32)]

    async def main():
        async with make_executor(SandboxConfig(backend="cpu", build={"cache_dir": tmp_path}), QUIET) as ex:
            return await asyncio.gather(*(ex.evaluate(task, p) for p in programs))

    verdicts = asyncio.run(main())
    assert [v.status for v in verdicts] == ["hack"] * 32, {e for v in verdicts for e in v.errors}
    assert all(v.infra_error is None for v in verdicts)


def test_an_exception_inside_an_evaluation_is_an_infra_error_verdict(task, tmp_path, monkeypatch):
    def broken(self, *args, **kwargs):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(Evaluator, "evaluate", broken)

    async def main():
        async with make_executor(SandboxConfig(backend="cpu", build={"cache_dir": tmp_path}), QUIET) as ex:
            return await ex.evaluate(task, TORCH_IN_PYTHON.read_text())

    verdict = asyncio.run(main())
    assert verdict.infra_error == "evaluator error: RuntimeError: injected fault"
    assert verdict.task_id == task.id
