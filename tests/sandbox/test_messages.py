"""The worker protocol's message kinds and bodies, validated where they arrive: a malformed or unknown message
from the worker is a runtime_error Verdict naming the message and the field, never an exception."""

import os
import threading
from pathlib import Path
from typing import get_args

import pytest
import torch

from rubric_rl.sandbox import Evaluator, Placement, SandboxConfig
from rubric_rl.sandbox.run.messages import FROM_WORKER, TO_WORKER, FromWorker, Setup, ToWorker, parse_body
from rubric_rl.sandbox.run.protocol import Channel, Message, ProtocolError

READY = ("ready", {"env": {"torch": "2", "device": "cpu"}})
TENSOR = {
    "kind": "tensor",
    "type": "torch.Tensor",
    "plain": True,
    "dtype": "torch.float32",
    "device": "cpu",
    "layout": "torch.strided",
}
REFERENCE_TRIAL = {"index": 0, "distribution": "task", "seed": 42, "finite": True, "mutates_inputs": False}


def test_every_kind_has_a_model_and_every_model_a_kind():
    assert set(TO_WORKER) == set(get_args(ToWorker))
    assert set(FROM_WORKER) == set(get_args(FromWorker))
    assert all(model.kind == kind for kind, model in {**TO_WORKER, **FROM_WORKER}.items())


@pytest.mark.parametrize(
    "kind, body, expected, words",
    [
        ("trial", {"outputs": []}, FROM_WORKER, "message 'trial': field 'index': Field required"),
        ("trial", {"index": "first"}, FROM_WORKER, "message 'trial': field 'index': Input should be a valid integer"),
        ("timing", {"times_ms": {"eager": "fast"}}, FROM_WORKER, "message 'timing': field 'times_ms.eager'"),
        ("error", {"stage": "load"}, FROM_WORKER, "message 'error': field 'message'"),
        ("done", {"phases": {}, "verdict": "correct"}, FROM_WORKER, "field 'verdict': Extra inputs are not permitted"),
        ("hello", {}, FROM_WORKER, "unexpected message 'hello'"),
        ("setup", {}, FROM_WORKER, "unexpected message 'setup'"),  # the evaluator's kind, from the worker
        ("sample", {"seed": 1}, TO_WORKER, "message 'sample': field 'k'"),
        ("ready", {}, TO_WORKER, "unexpected message 'ready'"),
    ],
)
def test_a_body_that_does_not_fit_its_model_names_the_message_and_the_field(kind, body, expected, words):
    with pytest.raises(ProtocolError, match=words):
        parse_body(Message(kind, body), expected)


def test_output_records_keep_their_kinds_and_values():
    body = {
        "index": 0,
        "outputs": [
            {"kind": "scalar", "value": True},
            {"kind": "scalar", "value": 3},
            {"kind": "other", "type": "str"},
        ],
        "aliases_input": [False] * 3,
        "aliases_parameter": [False] * 3,
        "mutated_inputs": False,
    }
    trial = parse_body(Message("trial", body), FROM_WORKER)
    assert trial.outputs == body["outputs"]  # type: ignore[attr-defined]
    assert trial.outputs[0]["value"] is True  # type: ignore[attr-defined]
    with pytest.raises(ProtocolError, match="outputs.0.tensor"):
        parse_body(Message("trial", {**body, "outputs": [{"kind": "tensor", "shape": [1]}]}), FROM_WORKER)


class ScriptedWorker:
    """Stands in for a worker process: reads the evaluator's setup, then sends ``script`` as a worker would."""

    def __init__(self, script: list[tuple]) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.fds = (to_worker_r, to_worker_w, from_worker_r, from_worker_w)
        self.channel = Channel(from_worker_r, to_worker_w)
        self._worker_side = Channel(to_worker_r, from_worker_w)
        self.script = script
        self.setup: Message | None = None
        self.proc = None
        self._thread = threading.Thread(target=self._play, daemon=True)

    def _play(self) -> None:
        self.setup = self._worker_side.recv()
        for kind, body, *tensors in self.script:
            self._worker_side.send(kind, body, tensors=tensors[0] if tensors else None)

    def start(self) -> Channel:
        self._thread.start()
        return self.channel

    def where(self) -> str:
        return ""

    def describe_exit(self) -> str:
        return "the scripted worker ended"

    def close(self) -> None:
        self._thread.join(timeout=5)
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass


def _evaluate(tmp_path: Path, examples_dir: Path, script: list[tuple], **placement):
    worker = ScriptedWorker(script)
    config = SandboxConfig(backend="cpu", build={"cache_dir": tmp_path / "build"}, limits={"run_timeout_s": 10})
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    candidate = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    verdict = Evaluator(config).evaluate(reference, candidate, placement=Placement(worker=worker, **placement))  # type: ignore[arg-type]
    return verdict, worker


@pytest.mark.parametrize(
    "script, words",
    [
        ([READY, ("reference", {"trials": [{"index": "zero"}]})], "message 'reference': field 'trials.0.index'"),
        ([("ready", {"env": {"torch": "2"}})], "message 'ready': field 'env.device': Field required"),
        ([READY, ("reference", {"trials": [], "known": True})], "message 'reference': field 'known'"),
        ([READY, ("hello", {})], "unexpected message 'hello'"),
        ([READY, ("captured", {"specs": []})], "unexpected message 'captured' while evaluating a candidate"),
        ([READY, ("build", {})], "message 'build': neither field 'spec' nor field 'spec_error'"),
        ([READY, ("timing", {"times_ms": {"eager": [1.0], "candidate": []}})], "field 'times_ms.candidate'"),
        (
            [
                READY,
                (
                    "reference",
                    {"trials": [{**REFERENCE_TRIAL, "outputs": [{**TENSOR, "shape": [2]}], "on_device": False}]},
                    [[torch.zeros(3)]],
                ),
            ],
            "trial 0's outputs do not match their records",
        ),
    ],
)
def test_a_malformed_message_from_the_worker_is_a_runtime_error_verdict(tmp_path, examples_dir, script, words):
    verdict, _ = _evaluate(tmp_path, examples_dir, script)
    assert verdict.status == "runtime_error" and verdict.infra_error is None, verdict
    assert any(words in e for e in verdict.errors), verdict.errors
    assert [f.rule for f in verdict.findings] == ["protocol.garbage"]


def test_the_worker_gets_its_memory_share_from_the_placement_and_the_config_as_given(tmp_path, examples_dir):
    verdict, worker = _evaluate(
        tmp_path, examples_dir, [READY, ("error", {"stage": "x", "message": "stop"})], memory_fraction=0.3
    )
    assert verdict.status == "runtime_error" and verdict.errors == ["x: stop"], verdict.errors
    assert worker.setup is not None
    setup = parse_body(worker.setup, TO_WORKER)
    assert isinstance(setup, Setup) and setup.memory_fraction == 0.3
    assert (
        setup.config.limits.gpu_memory_fraction == SandboxConfig().limits.gpu_memory_fraction
    )  # the user's, not rewritten
    unplaced, worker = _evaluate(tmp_path, examples_dir, [READY, ("error", {"stage": "x", "message": "stop"})])
    assert parse_body(worker.setup, TO_WORKER).memory_fraction == SandboxConfig().limits.gpu_memory_fraction  # type: ignore[arg-type, attr-defined]


def test_a_placement_refuses_a_memory_share_outside_the_device():
    with pytest.raises(ValueError, match="Placement.memory_fraction"):
        Placement(memory_fraction=1.5)
    with pytest.raises(ValueError, match="Placement.run_timeout_s"):
        Placement(run_timeout_s=0)
