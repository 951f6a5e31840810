"""Task synthesis end to end on the cpu: 50 tasks that load and run, kill -9 and resume, the LLM composer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_env import child_env
from typer.testing import CliRunner

from rubric_rl.cli import app
from rubric_rl.tasks import load_tasks
from rubric_rl.tasks.similarity import SimilarityIndex
from rubric_rl.tasks.synth import FUNNEL, LLMComposerConfig, ProbeConfig, SynthConfig, Synthesizer, sidecar

REPO = Path(__file__).resolve().parents[2]
WIDE = (0.0, 1e9)  # no runtime window: every other filter is deterministic, so a run's outcome is too


@pytest.fixture(scope="module")
def fifty(tmp_path_factory: pytest.TempPathFactory, examples_dir: Path) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("synth") / "tasks.jsonl"
    against = SimilarityIndex([(t.id, t.name, t.code) for t in load_tasks(examples_dir / "tasks.jsonl")])
    cfg = SynthConfig(n=50, device="cpu", seed=11, probe=ProbeConfig(compile=False))
    summary = Synthesizer(cfg, out, against=against).run()
    return out, summary


def test_fifty_synthesised_tasks_load_and_run(fifty):
    import torch

    out, summary = fifty
    tasks = load_tasks(out)
    assert len(tasks) == 50 and len({t.id for t in tasks}) == 50
    for t in tasks:
        ns: dict = {}
        exec(compile(t.code, t.name, "exec"), ns)
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]())
        with torch.no_grad():
            y = model(*ns["get_inputs"]())
        assert torch.isfinite(y).all(), t.name
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        assert row["level"] is None and row["provenance"]["generator"] == "rubric_rl.tasks.synth"
        assert 2 <= len(row["provenance"]["ops"]) <= 5
        assert all(row["filters"][s]["passed"] for s in FUNNEL if s != "compiles")
        assert row["filters"]["runtime"]["window_ms"] == [0.1, 20.0]
        assert "nearest" in row["filters"]["decontaminated"]


def test_the_funnel_accounts_for_every_candidate(fifty):
    out, summary = fifty
    funnel = [json.loads(line) for line in sidecar(out, "funnel.jsonl").read_text().splitlines()]
    assert summary["candidates"] == len(funnel) and summary["accepted"] == 50
    assert [r["candidate"] for r in funnel] == list(range(len(funnel)))
    stages = summary["funnel"]
    assert [s["stage"] for s in stages] == list(FUNNEL)
    assert stages[0]["entered"] - sum(s["removed"] for s in stages) == 50
    hist = summary["histograms"]
    assert sum(hist["fusion_size_accepted"].values()) == 50 and set(hist["fusion_size_accepted"]) <= {2, 3, 4, 5}
    assert sum(hist["ops_accepted"].values()) == sum(int(k) * v for k, v in hist["fusion_size_accepted"].items())
    assert summary["this_run"]["tasks_per_minute"] > 0
    assert json.loads(sidecar(out, "summary.json").read_text())["accepted"] == 50


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_resume_after_kill_9_loses_and_repeats_nothing(tmp_path):
    n = 20
    out = tmp_path / "killed" / "tasks.jsonl"
    args = [sys.executable, "-c", "from rubric_rl.cli import main; main()", "tasks", "synth", "--n", str(n),
            "--out", str(out), "--seed", "5", "--no-decontaminate", "--no-compile", "--runtime-window", "0,1e9",
            "--json"]  # fmt: skip
    env = child_env()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    funnel = sidecar(out, "funnel.jsonl")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if funnel.exists() and len(funnel.read_text().splitlines()) >= 6:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with funnel.open("a") as f:  # as if the kill had landed mid-write
        f.write('{"candidate": 999, "acc')
    with out.open("a") as f:
        f.write('{"level": null, "problem_')
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    reference = tmp_path / "straight" / "tasks.jsonl"
    cfg = SynthConfig(n=n, device="cpu", seed=5, probe=ProbeConfig(compile=False, runtime_ms=WIDE))
    Synthesizer(cfg, reference).run()
    got, want = _rows(out), _rows(reference)
    assert len(got) == n
    assert sorted(r["provenance"]["candidate"] for r in got) == sorted(r["provenance"]["candidate"] for r in want)
    assert {r["name"]: r["code"] for r in got} == {r["name"]: r["code"] for r in want}
    candidates = [r["candidate"] for r in _rows(funnel)]
    assert sorted(candidates) == list(range(len(candidates)))  # each once, none skipped
    assert len(load_tasks(out)) == n


def test_a_task_lost_between_the_two_writes_is_restored(tmp_path):
    out = tmp_path / "t.jsonl"
    cfg = SynthConfig(n=3, device="cpu", probe=ProbeConfig(compile=False, runtime_ms=WIDE))
    Synthesizer(cfg, out).run()
    rows = _rows(out)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))  # the last task row never made it
    synth = Synthesizer(cfg, out)
    done, accepted = synth.resume_state()
    assert accepted == 3 and _rows(out)[-1] == rows[-1]
    assert synth.run()["this_run"]["candidates"] == 0


def test_a_rerun_with_other_settings_is_refused(tmp_path):
    out = tmp_path / "t.jsonl"
    Synthesizer(SynthConfig(n=1, probe=ProbeConfig(compile=False, runtime_ms=WIDE)), out).run()
    with pytest.raises(ValueError, match=r"other settings \(seed\)"):
        Synthesizer(SynthConfig(n=1, seed=3, probe=ProbeConfig(compile=False, runtime_ms=WIDE)), out).run()


LLM_PROGRAM = """Here is the program.

```python
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x):
        x = self.fc(x)
        x = torch.tanh(x) * {scale}
        return x


features = 64


def get_inputs():
    return [torch.randn(16, features)]


def get_init_inputs():
    return [features]
```
"""


def test_the_llm_composer(chat_server, tmp_path):
    server = chat_server(lambda k: LLM_PROGRAM.format(scale=1.0 + k))
    server.script([(429, '{"error": {"message": "slow down"}}'), (200, LLM_PROGRAM.format(scale=9.0)),
                   (200, "I cannot help with that."), (200, "```python\nimport os\n" + LLM_PROGRAM[30:])])  # fmt: skip
    llm = LLMComposerConfig(base_url=server.url, model="stub", backoff_initial_s=0.01, backoff_max_s=0.02)
    cfg = SynthConfig(n=2, composer="llm", llm=llm, probe=ProbeConfig(compile=False, runtime_ms=WIDE))
    out = tmp_path / "llm.jsonl"
    summary = Synthesizer(cfg, out).run()
    funnel = _rows(sidecar(out, "funnel.jsonl"))
    assert [r["rejected_by"] for r in funnel] == [None, "composed", "composed", None]
    assert "no usable program" in funnel[1]["filters"]["composed"]["error"]
    assert "static screen" in funnel[2]["filters"]["composed"]["error"]
    assert summary["accepted"] == 2 and len(server.requests) == 5  # one request retried after the 429
    prompt = server.requests[0]["messages"][0]["content"]
    assert "Its first input has the layout" in prompt and "between 0 and 1e+09 ms" in prompt
    task = _rows(out)[0]
    assert task["provenance"]["llm"]["model"] == "stub" and "9.0" in task["code"]


def test_cli_requires_a_decontamination_source(tmp_path):
    result = CliRunner().invoke(app, ["tasks", "synth", "--n", "1", "--out", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "--kernelbench SOURCE" in result.output
