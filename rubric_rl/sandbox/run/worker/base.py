"""What every mode of the worker shares: the channel, the config, the device, the audit hook and its phase clock."""

from __future__ import annotations

import linecache
import os
import sys
import time
import traceback
import types
from dataclasses import dataclass
from typing import Any

from rubric_rl.sandbox.run.messages import (
    TO_WORKER,
    Body,
    Go,
    NextTrial,
    Ready,
    Sample,
    SampleRequest,
    Setup,
    WorkerEnv,
    parse_body,
)
from rubric_rl.sandbox.run.messages import send as send_body
from rubric_rl.sandbox.run.protocol import Channel

MAX_ERROR_CHARS = 2000


class CandidateError(Exception):
    """The candidate (or the task) raised; carries the phase and a digested traceback."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


def digest_exception(exc: BaseException, filename: str | None = None) -> str:
    """The exception in one bounded line, with the last line of ``filename`` (the candidate's) it passed through."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if filename:
        own = [f for f in frames if f.filename == filename]
        if own:
            where = f" (candidate line {own[-1].lineno}: {(own[-1].line or '').strip()[:120]})"
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS // 2] + " ... " + text[-MAX_ERROR_CHARS // 2 :]
    return text + where


def load_module(name: str, source: str) -> types.ModuleType:
    """Execute ``source`` as module ``name`` (its lines known to tracebacks as ``name.py``)."""
    filename = f"{name}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def refuse_load(*args: Any, **kwargs: Any) -> Any:
    """What ``torch.utils.cpp_extension.load`` becomes: only load_inline's sources are built (by the evaluator)."""
    raise RuntimeError("torch.utils.cpp_extension.load is not available in the sandbox; use load_inline")


@dataclass
class ReferenceModel:
    """The task's reference program, imported, and its model built on the device."""

    module: types.ModuleType
    init_inputs: list[Any]
    model: Any


class Session:
    """One worker's state across its phases: the evaluator's setup, the device backend, the audit hook, and the
    seconds of each phase (its waits for the evaluator apart: sent with each phase's last message, so a slow stage
    can be told apart from a slow evaluator)."""

    def __init__(self, chan: Channel, setup: Setup) -> None:
        import torch

        from rubric_rl.sandbox.backends import make_backend
        from rubric_rl.sandbox.checks.audit import AuditGuard

        self.torch = torch
        self.chan = chan
        self.setup = setup
        self.cfg = setup.config
        self.backend = make_backend(self.cfg.backend)
        self.device = self.backend.device
        self.audit = AuditGuard(os.getcwd(), [str(self.cfg.build.cache_dir)])
        self.stage = "setup"
        self.phases: dict[str, float] = {}
        self.mark = time.monotonic()

    # ---- the phase clock and the channel ----------------------------------------------------------------------
    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - self.mark, 4)
        self.mark = now

    def send(self, body: Body, tensors: list[Any] | None = None) -> None:
        send_body(self.chan, body, tensors)

    def receive(self) -> Body:
        """The evaluator's next message, validated."""
        return parse_body(self.chan.recv(), TO_WORKER)

    def recv(self) -> Body:
        """The evaluator's next message; the wait for it is counted as the evaluator's, not the phase's."""
        asked = time.monotonic()
        body = self.receive()
        waited = time.monotonic() - asked
        self.phases["evaluator_wait_s"] = round(self.phases.get("evaluator_wait_s", 0.0) + waited, 4)
        self.mark += waited
        return body

    def next_trial(self) -> None:
        """Ask before the next trial; the evaluator answers once the device is ours again (a waiting timing
        may go first)."""
        self.send(NextTrial())
        reply = self.recv()
        if not isinstance(reply, Go):
            raise RuntimeError(f"protocol: expected 'go' before the next trial, got {reply.kind!r}")

    def spot_sample(self, cand: list[Any], ref: list[Any], about: SampleRequest) -> tuple[list[Any], list[Any]]:
        """Host copies of both outputs at positions the evaluator draws now, after the candidate's output
        exists (so it cannot have been made right only there)."""
        from rubric_rl.sandbox.measure.inputs import sample_pairs

        self.send(about)
        reply = self.receive()
        if not isinstance(reply, Sample):
            raise CandidateError(self.stage, f"expected a sample seed, got {reply.kind!r}")
        return sample_pairs(cand, ref, reply.seed, reply.k)

    # ---- the device and the models ------------------------------------------------------------------------------
    def start_reference(self) -> ReferenceModel:
        """Set the device up, tell the evaluator where this runs, and build the reference's model."""
        torch = self.torch
        self.mark = time.monotonic()
        self.backend.setup(memory_fraction=self.setup.memory_fraction, threads=self.cfg.cpu_threads)
        env = WorkerEnv(torch=str(torch.__version__), **self.backend.describe())
        self.lap("setup_s")
        self.send(Ready(env=env))
        torch.set_grad_enabled(False)
        self.audit.install()

        self.stage = "reference"
        try:
            module = load_module("reference", self.setup.reference)
            self.backend.seed(self.cfg.seed)
            init_inputs = list(module.get_init_inputs())
            model = self.construct(module.Model, init_inputs)
            self.backend.synchronize()
        except Exception as e:
            raise CandidateError("reference", "the reference program failed: " + digest_exception(e)) from e
        self.lap("reference_model_s")
        return ReferenceModel(module, init_inputs, model)

    def construct(self, model_cls: Any, init_inputs: list[Any]) -> Any:
        """A model built from the seed with its parameters made on the device. The reference, ModelNew and the
        compile baseline are built alike (the reference's state is then loaded where names match); made on the
        host and moved, the 671M parameters of KernelBench L3-1 took 5 s of serial initialisation per model on
        the H200 host, in every evaluation."""
        self.backend.seed(self.cfg.seed)
        with self.torch.device(self.device):
            model = model_cls(*init_inputs)
        return model.to(self.device) if isinstance(model, self.torch.nn.Module) else model

    def draw(self, reference: types.ModuleType, seed: int, distribution: str = "task") -> list[Any]:
        """The reference's ``get_inputs()`` from ``seed``, on the device (bit-identical for the same seed)."""
        from rubric_rl.sandbox.measure.inputs import make_inputs

        return make_inputs(
            reference, seed=seed, device=self.device, distribution=distribution, backend_seed=self.backend.seed
        )


def load_matching_state(ref_model: Any, new_model: Any) -> int:
    """Copy the reference's parameters and buffers into ``new_model`` wherever names and shapes match."""
    ref_state = ref_model.state_dict()
    new_state = new_model.state_dict()
    matched = {k: v for k, v in ref_state.items() if k in new_state and new_state[k].shape == v.shape}
    if matched:
        new_model.load_state_dict(matched, strict=False)
    return len(matched)
