"""Reference outputs reused across a task's candidates: the cache itself, and evaluations that use it."""

from pathlib import Path

import pytest
import torch

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.measure.reference_cache import KnownReference, ReferenceCache, reference_key
from rubric_rl.sandbox.run import conversation
from rubric_rl.sandbox.run.messages import ReferenceTrial


def _known(mb: float, on_device: bool = False) -> KnownReference:
    values = [[torch.zeros(int(mb * 2**20) // 4)]]
    trial = ReferenceTrial(
        index=0, distribution="task", seed=0, finite=True, outputs=[], mutates_inputs=False, on_device=on_device
    )
    return KnownReference(meta=[trial], values=values, task_flags=[])


def test_the_cache_is_bounded_in_bytes_and_evicts_the_least_recently_used():
    cache = ReferenceCache(max_mb=3)
    assert cache.put("a", _known(1)) and cache.put("b", _known(1)) and cache.put("c", _known(1))
    assert cache.get("a") is not None  # a is now the most recently used
    assert cache.put("d", _known(1))
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("d") is not None
    assert not cache.put("huge", _known(4)) and cache.get("huge") is None
    assert not cache.put("kept", _known(0.1, on_device=True))
    stats = cache.stats()
    assert stats["entries"] == 3 and stats["bytes"] == 3 << 20
    assert stats["hits"] == 3 and stats["misses"] == 2


def test_the_default_budget_holds_a_batch_of_large_tasks():
    # 12 tasks with two 1.9 GB references among them thrashed the old 2 GB default (1 hit in 26 on the H200).
    import os

    host_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    assert SandboxConfig().correctness.reference_cache_mb == pytest.approx(host_mb / 8)
    assert SandboxConfig(correctness={"reference_cache_mb": 0}).correctness.reference_cache_mb == 0


def test_the_key_follows_what_the_reference_outputs_depend_on():
    cfg = SandboxConfig()
    key = reference_key("ref", cfg, "gpu 0")
    assert key == reference_key("ref", cfg.updated(timing={"trials": 7}, limits={"run_timeout_s": 9}), "gpu 0")
    for changed in (
        reference_key("ref2", cfg, "gpu 0"),
        reference_key("ref", cfg, "gpu 1"),
        reference_key("ref", cfg.model_copy(update={"seed": 1}), "gpu 0"),
        reference_key("ref", cfg.updated(correctness={"trials": 2}), "gpu 0"),
        reference_key("ref", cfg.updated(correctness={"extra_distributions": []}), "gpu 0"),
        reference_key("ref", cfg.updated(correctness={"ship_outputs_max_mb": 32}), "gpu 0"),
    ):
        assert changed != key
    # What decides which outputs are kept is the limit in effect, however it was given.
    assert key == reference_key("ref", cfg.updated(correctness={"ship_outputs_max_mb": 256}), "gpu 0")


@pytest.fixture(scope="module")
def sandbox(build_cache: Path) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"trials": 5, "warmup_trials": 1},
        limits={"run_timeout_s": 120},
    )


def test_later_candidates_of_a_task_reuse_its_reference_outputs(sandbox, examples_dir, monkeypatch):
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    correct = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    wrong = (examples_dir / "fused_add_relu" / "candidate_wrong.py").read_text()
    ev = Evaluator(sandbox)
    first = ev.evaluate(reference, correct)
    assert first.status == "correct" and not first.reference_reused, first.errors

    unpacked: list[str] = []
    unpack = conversation.unpack_tensors

    def recording_unpack(msg):
        unpacked.append(msg.type)
        return unpack(msg)

    monkeypatch.setattr(conversation, "unpack_tensors", recording_unpack)
    again = ev.evaluate(reference, correct)
    assert again.status == "correct" and again.reference_reused, again.errors
    assert "reference" not in unpacked  # no reference outputs crossed from the worker
    assert [(t.distribution, t.seed) for t in again.trials if t.distribution != "timed"] == [
        (t.distribution, t.seed) for t in first.trials if t.distribution != "timed"
    ]
    assert all(t.passed for t in again.trials)
    bad = ev.evaluate(reference, wrong)  # a wrong candidate still fails against the reused outputs
    assert bad.status == "incorrect" and bad.reference_reused
    assert ev.reference_cache.stats()["hits"] == 2

    off = Evaluator(sandbox.updated(correctness={"reference_cache_mb": 0}))
    assert not off.evaluate(reference, correct).reference_reused
    assert not off.evaluate(reference, correct).reference_reused
