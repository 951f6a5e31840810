"""The execution worker: one candidate against its reference, in a fresh process the evaluator started.

Run as ``python -m rubric_rl.sandbox.run.worker READ_FD WRITE_FD`` by ``rubric_rl.sandbox.run.process``; it talks to
the evaluator over those two pipes (``rubric_rl.sandbox.run.protocol``) and nothing else.

What it protects against: the candidate seeing the reference's results (they are computed, sent to the
evaluator and poisoned before the candidate is imported; each model gets its own copy of the inputs);
the candidate judging itself (outputs are compared by the evaluator, in another process; outputs too large
to ship are compared here against fingerprinted kept references, and the evaluator spot-checks positions it
draws after the output exists); the candidate
building its own way (``load_inline`` is replaced: builds are requested from the evaluator, which owns the
flags and the cache); in-process tampering (integrity snapshots, the audit hook, the dispatch-level op
recorder). What it does not protect against: native code acting directly on the process or the machine. The
native source checks refuse the obvious routes; the process boundary, the temporary directory and the
resource limits bound the rest; run the evaluator in a container for hostile code.

The phases, in order: reference (trusted), load (candidate imported), correctness, then, only if the evaluator
asks, timing and a kernel profile. Any exception from candidate code ends the worker with an ``error``
message naming the phase; the evaluator turns it, or the worker's death, into a Verdict.
"""

from __future__ import annotations

import linecache
import os
import secrets
import sys
import time
import traceback
import types
from typing import Any

from rubric_rl.sandbox.run.protocol import Channel, Message

MAX_ERROR_CHARS = 2000
# Positions of each large reference output sent to the evaluator before the candidate loads: what the output
# computed again after the candidate's trial is held to when it does not reproduce the bits (see _correctness).
REFERENCE_SAMPLES = 1 << 16


class CandidateError(Exception):
    """The candidate (or the task) raised; carries the phase and a digested traceback."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


def _digest_exception(exc: BaseException, filename: str | None = None) -> str:
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
    filename = f"{name}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


class _CapturedExtension:
    """What load_inline returns while capturing: the module is imported for its build requests only."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"extension {self._name!r} is not built during capture")

        return unavailable


class Worker:
    def __init__(self, chan: Channel, setup: dict[str, Any]) -> None:
        import torch

        from rubric_rl.sandbox.backends import make_backend
        from rubric_rl.sandbox.checks.audit import AuditGuard
        from rubric_rl.sandbox.config import SandboxConfig

        self.torch = torch
        self.chan = chan
        self.cfg = SandboxConfig.model_validate(setup["config"])
        self.reference_source: str = setup["reference"]
        self.candidate_source: str = setup["candidate"]
        self.mode: str = setup.get("mode", "evaluate")
        # The reference's trial records from an earlier evaluation of this task (the evaluator holds its
        # outputs): the trials' inputs are drawn again and the reference does not run them.
        self.known_reference: list[dict[str, Any]] | None = setup.get("known_reference")
        self.captured: list[dict[str, Any]] = []
        self.backend = make_backend(self.cfg.backend)
        self.device = self.backend.device
        self.audit = AuditGuard(os.getcwd(), [str(self.cfg.cache_dir)])
        self.stage = "setup"
        self.extensions: list[dict[str, Any]] = []
        # Reference outputs too large to ship (see SandboxConfig.ship_outputs_limit_bytes), by trial index, with
        # the fingerprint they had before the candidate was imported; None for outputs computed again after the
        # candidate's trial (see _reference_trials).
        self.kept_refs: dict[int, tuple[list[Any] | None, list[str]]] = {}
        self.recompute_large: bool | None = None  # whether they are computed again (decided on the first)
        # Seconds of the worker's own phases, waits for the evaluator (builds, the device) apart: sent with
        # each phase's last message, so a slow stage can be told apart from a slow evaluator.
        self.phases: dict[str, float] = {}
        self._mark = time.monotonic()
        self._gate_wait_s = 0.0  # what torch.compile's warm-up waited for the device (see _device_wanted)

    def _lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - self._mark, 4)
        self._mark = now

    def _recv(self) -> Message:
        """The evaluator's next message; the wait for it is counted as the evaluator's, not the phase's."""
        asked = time.monotonic()
        msg = self.chan.recv()
        waited = time.monotonic() - asked
        self.phases["evaluator_wait_s"] = round(self.phases.get("evaluator_wait_s", 0.0) + waited, 4)
        self._mark += waited
        return msg

    # ---- the evaluator's load_inline -------------------------------------------------------------------------
    def _load_inline(self, *args: Any, **kwargs: Any) -> Any:
        import importlib.util

        from rubric_rl.sandbox.build.extension import SpecError, spec_from_call

        try:
            spec = spec_from_call(args, kwargs)
        except SpecError as e:
            if self.mode == "capture":
                raise RuntimeError(str(e)) from None
            self.chan.send("build", {"spec_error": str(e)})
            raise RuntimeError(str(e)) from None
        if self.mode == "capture":
            self.captured.append(spec.model_dump())
            return _CapturedExtension(spec.name)
        self.chan.send("build", {"spec": spec.model_dump()})
        reply = self._recv()
        if reply.type != "built" or not reply.body.get("ok"):
            raise RuntimeError(f"extension {spec.name!r} did not build")
        library, module_name = reply.body["library"], reply.body["module_name"]
        was_armed, self.audit.armed = self.audit.armed, False  # our own import of the built library
        try:
            import_spec = importlib.util.spec_from_file_location(module_name, library)
            if import_spec is None or import_spec.loader is None:
                raise RuntimeError(f"cannot load {library}")
            module = importlib.util.module_from_spec(import_spec)
            import_spec.loader.exec_module(module)
        finally:
            self.audit.armed = was_armed
        self.extensions.append({"name": spec.name, "module": module_name})
        return module

    def _refuse_load(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("torch.utils.cpp_extension.load is not available in the sandbox; use load_inline")

    # ---- phases ----------------------------------------------------------------------------------------------
    def run(self) -> None:
        if self.mode == "capture":
            self._capture()
            return
        torch = self.torch
        self._mark = time.monotonic()
        self.backend.setup(memory_fraction=self.cfg.gpu_memory_fraction, threads=self.cfg.cpu_threads)
        env = {"torch": torch.__version__, **self.backend.describe()}
        self._lap("setup_s")
        self.chan.send("ready", {"env": env})
        torch.set_grad_enabled(False)
        self.audit.install()

        self.stage = "reference"
        try:
            reference = load_module("reference", self.reference_source)
            init_inputs = self._init_inputs(reference)
            ref_model = self._construct(reference.Model, init_inputs)
            self.backend.synchronize()
        except Exception as e:
            raise CandidateError("reference", "the reference program failed: " + _digest_exception(e)) from e
        self._lap("reference_model_s")
        if self.mode == "baseline":
            self.stage = "compile"
            compiled = (
                self._compile_reference(reference, ref_model, init_inputs, rearm=False)
                if self.cfg.compile_baseline
                else (None, {})
            )
            self._lap("compile_warmup_s")
            self.chan.send("warm", {})  # the evaluator answers when the device is ours alone
            if self.chan.recv().type != "time":
                return
            self._lap("gate_wait_s")
            self.stage = "timing"
            self._timing(reference, ref_model, None, init_inputs, take_snapshot=None, compiled=compiled)
            self.chan.send("done", {})
            return
        trials = self._reference_trials(reference, ref_model)

        if self._recv().type != "load":
            return
        self.stage = "load"
        from torch.utils import cpp_extension

        from rubric_rl.sandbox.checks.integrity import compare, take_snapshot

        cpp_extension.load_inline = self._load_inline
        cpp_extension.load = self._refuse_load
        sys.modules.pop("reference", None)  # the candidate must not find the reference by name
        linecache.cache.pop("reference.py", None)
        self._warm_up_guard()
        snapshot = take_snapshot()
        self._lap("load_preamble_s")
        started = time.monotonic()
        self.audit.armed = True
        try:
            candidate = load_module("candidate", self.candidate_source)
            self._lap("candidate_import_s")
            model_cls = getattr(candidate, "ModelNew", None)
            if not isinstance(model_cls, type):
                raise CandidateError("load", "the candidate program defines no class ModelNew")
            new_model = self._construct(model_cls, init_inputs)
            if isinstance(new_model, torch.nn.Module):
                matched = self._load_matching_state(ref_model, new_model)
            else:
                matched = 0
            self.backend.synchronize()
        except CandidateError:
            raise
        except Exception as e:
            raise CandidateError("load", _digest_exception(e, "candidate.py")) from e
        self._lap("model_init_s")
        self.chan.send(
            "loaded",
            {
                "phases": dict(self.phases),
                "load_s": time.monotonic() - started,
                "state_matched": matched,
                "extensions": self.extensions,
                "integrity": compare(snapshot),
                "audit": list(self.audit.violations),
            },
        )

        self.stage = "correctness"
        self._correctness(reference, ref_model, new_model, trials)
        from rubric_rl.sandbox.measure.inputs import poison

        for refs, _ in self.kept_refs.values():  # timing needs the memory; nothing may find them later
            if refs is not None:
                poison(refs)
        self.kept_refs.clear()
        trials.clear()
        self._lap("correctness_trials_s")
        self.chan.send(
            "trials_done",
            {"phases": dict(self.phases), "integrity": compare(snapshot), "audit": list(self.audit.violations)},
        )
        go = self._recv()
        compiled_here: tuple[Any | None, dict[str, Any]] | None = None
        if go.type == "compile":  # no task baseline to reuse: torch.compile is timed here, beside the candidate
            self.stage = "compile"
            compiled_here = self._compile_reference(reference, ref_model, init_inputs, rearm=True)
            self._lap("compile_warmup_s")
            self.chan.send("compiled", {})  # the evaluator answers when the device is ours alone
            go = self._recv()
        if go.type != "time":
            return

        self.stage = "timing"
        self._timing(reference, ref_model, new_model, init_inputs, take_snapshot=take_snapshot, compiled=compiled_here)
        if self.cfg.backend == "cuda" and self.cfg.profile_kernels:
            if self._recv().type != "profile":  # sent once the device is shared again
                return
            self.stage = "profile"
            self._profile(reference, new_model)
            self._lap("profile_s")
        self.chan.send("done", {"phases": dict(self.phases), "audit": list(self.audit.violations)})

    def _capture(self) -> None:
        """Import the candidate only to record its load_inline calls (for building ahead of execution)."""
        from torch.utils import cpp_extension

        cpp_extension.load_inline = self._load_inline
        cpp_extension.load = self._refuse_load
        self.stage = "capture"
        self.audit.install()
        self.audit.armed = True
        error = None
        try:
            load_module("candidate", self.candidate_source)
        except Exception as e:  # the module may fail after its builds (stub extensions): what was captured counts
            error = _digest_exception(e, "candidate.py")
        self.audit.armed = False
        self.chan.send("captured", {"specs": self.captured, "error": error})

    def _warm_up_guard(self) -> None:
        """Run the op recorder once before arming: its first use imports parts of torch lazily."""
        from rubric_rl.sandbox.checks.guard import GuardedCall

        torch = self.torch
        one = torch.ones(2, device=self.device)
        GuardedCall()(torch.add, one, one)
        import torch._dynamo  # noqa: F401 - imported by dispatch modes and the profiler on first use

    def _init_inputs(self, reference: types.ModuleType) -> list[Any]:
        self.backend.seed(self.cfg.seed)
        return list(reference.get_init_inputs())

    def _construct(self, model_cls: Any, init_inputs: list[Any]) -> Any:
        """A model built from the seed with its parameters made on the device. The reference, ModelNew and the
        compile baseline are built alike (the reference's state is then loaded where names match); made on the
        host and moved, the 671M parameters of KernelBench L3-1 took 5 s of serial initialisation per model on
        the H200 host, in every evaluation."""
        self.backend.seed(self.cfg.seed)
        with self.torch.device(self.device):
            model = model_cls(*init_inputs)
        return model.to(self.device) if isinstance(model, self.torch.nn.Module) else model

    def _load_matching_state(self, ref_model: Any, new_model: Any) -> int:
        """Copy the reference's parameters and buffers into ModelNew wherever names and shapes match."""
        ref_state = ref_model.state_dict()
        new_state = new_model.state_dict()
        matched = {k: v for k, v in ref_state.items() if k in new_state and new_state[k].shape == v.shape}
        if matched:
            new_model.load_state_dict(matched, strict=False)
        return len(matched)

    def _trial_plan(self) -> list[tuple[str, int]]:
        plan = [("task", self.cfg.seed + i) for i in range(self.cfg.correctness_trials)]
        plan += [(d, self.cfg.seed + 1000 + j) for j, d in enumerate(self.cfg.extra_distributions)]
        return plan

    def _reference_trials(self, reference: types.ModuleType, ref_model: Any) -> list[dict[str, Any]]:
        """Reference outputs for every trial: sent to the evaluator, then poisoned, before the candidate loads.

        Above ``ship_outputs_max_mb`` they are compared here instead, against their fingerprint from now. If the
        reference reproduces its bits (tried once, on the first such trial), each is poisoned now and computed
        again after the candidate's trial, from inputs drawn again; otherwise all are kept on the device until
        their trial. Kept, KernelBench L1-19's seven 6 GB outputs beside a trial's inputs and the candidate's
        output needed all of an H100, and each of its candidates ran alone."""
        from rubric_rl.sandbox.measure.correctness import degenerate_task_flags
        from rubric_rl.sandbox.measure.inputs import (
            clone_inputs,
            describe,
            fingerprint,
            flatten_outputs,
            make_inputs,
            nbytes,
            poison,
            same_bits,
            sample_pairs,
            subsample,
            to_host,
        )

        if self.known_reference is not None:
            return self._known_reference_trials(reference)
        torch = self.torch
        trials: list[dict[str, Any]] = []
        meta: list[dict[str, Any]] = []
        payload: list[list[Any]] = []
        kept_task_samples: list[list[Any]] = []
        for index, (distribution, seed) in enumerate(self._trial_plan()):
            if index:
                self._next_trial()
            try:
                inputs = make_inputs(
                    reference, seed=seed, device=self.device, distribution=distribution, backend_seed=self.backend.seed
                )
                # Inputs too large to ship are drawn again for the candidate rather than held: seven trials of
                # kept outputs and held inputs do not fit on one GPU. Those the reference runs on as they are,
                # their fingerprint telling whether it wrote into them (a second copy of KernelBench L1-19's
                # 6 GB inputs beside its kept outputs overran half an H200).
                input_print = fingerprint(inputs) if self._drawn_again(inputs) else None
                x = clone_inputs(inputs) if input_print is None else inputs
                out = flatten_outputs(ref_model(*x))
                self.backend.synchronize()
            except Exception as e:
                raise CandidateError("reference", "the reference program failed: " + _digest_exception(e)) from e
            finite = all(
                bool(torch.isfinite(o).all())
                for o in out
                if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex())
            )
            entry = {
                "index": index,
                "distribution": distribution,
                "seed": seed,
                "finite": finite,
                "outputs": [describe(o) for o in out],
                "mutates_inputs": not same_bits(x, inputs) if input_print is None else fingerprint(x) != input_print,
            }
            skip = distribution != "task" and not finite
            if skip:
                entry["skipped"] = "the reference is not finite on these inputs"
            keep = not skip and nbytes(out) > self.cfg.ship_outputs_limit_bytes()
            entry["on_device"] = keep
            meta.append(entry)
            if keep:  # compared here, on the device; the evaluator spot-checks (see _correctness)
                printed = fingerprint(out)
                if distribution == "task":
                    kept_task_samples.append([subsample(o) for o in out])
                payload.append([])
            else:
                payload.append([] if skip else [to_host(o) if isinstance(o, torch.Tensor) else None for o in out])
                poison(out)
            if keep and input_print is None:
                # Drawn again for the candidate (and must come out the same) beside kept outputs, however small.
                input_print = fingerprint(inputs)
            held = inputs if input_print is None else None
            kept = out if keep else None
            del out, x, inputs
            if skip:
                continue
            trial = {
                "index": index,
                "inputs": held,
                "mutates": entry["mutates_inputs"],
                "distribution": distribution,
                "seed": seed,
                "input_print": input_print,
            }
            trials.append(trial)
            if kept is not None:
                if self.recompute_large is None:
                    self.recompute_large = self._reference_reproduces(reference, ref_model, trial, printed)
                if self.recompute_large:
                    sample_seed = secrets.randbits(62)
                    trial["sample_seed"] = sample_seed
                    payload[-1] = sample_pairs(kept, kept, sample_seed, REFERENCE_SAMPLES)[1]
                    poison(kept)
                    kept = None
                self.kept_refs[index] = (kept, printed)
                entry["recomputed"] = self.recompute_large
                del kept
        flags = degenerate_task_flags(kept_task_samples, self.cfg) if kept_task_samples else []
        self._lap("reference_trials_s")
        self.chan.send(
            "reference", {"trials": meta, "kept_task_flags": flags, "phases": dict(self.phases)}, tensors=payload
        )
        del payload
        self.backend.poison_free_memory()
        return trials

    def _draw_inputs(self, reference: types.ModuleType, trial: dict[str, Any]) -> list[Any]:
        """A trial's inputs drawn again from its seed and distribution (bit-identical on the same device)."""
        from rubric_rl.sandbox.measure.inputs import make_inputs

        return make_inputs(
            reference,
            seed=trial["seed"],
            device=self.device,
            distribution=trial["distribution"],
            backend_seed=self.backend.seed,
        )

    def _drawn_again(self, inputs: list[Any]) -> bool:
        """Inputs this large are drawn again for the candidate's trial rather than held or copied."""
        from rubric_rl.sandbox.measure.inputs import nbytes

        return nbytes(inputs) > self.cfg.ship_outputs_limit_bytes()

    def _reference_again(self, reference: types.ModuleType, ref_model: Any, trial: dict[str, Any]) -> list[Any]:
        """The reference's outputs on a large trial's inputs, drawn again (its inputs are never held)."""
        from rubric_rl.sandbox.measure.inputs import flatten_outputs

        x = self._draw_inputs(reference, trial)
        out = flatten_outputs(ref_model(*x))
        self.backend.synchronize()
        return out

    def _reference_reproduces(
        self, reference: types.ModuleType, ref_model: Any, trial: dict[str, Any], printed: list[str]
    ) -> bool:
        """Whether the reference, run again on a trial's inputs, gives the same bits, before the candidate loads:
        only then may a changed fingerprint after the candidate's trial be called tampering (a reference with
        nondeterministic kernels, atomics in a reduction, keeps its outputs instead)."""
        from rubric_rl.sandbox.measure.inputs import fingerprint, poison

        try:
            again = self._reference_again(reference, ref_model, trial)
        except Exception as e:
            raise CandidateError("reference", "the reference program failed: " + _digest_exception(e)) from e
        same = fingerprint(again) == printed
        poison(again)
        return same

    def _known_reference_trials(self, reference: types.ModuleType) -> list[dict[str, Any]]:
        """The trials of a reference the evaluator already knows: the same seeded inputs, no reference run."""
        from rubric_rl.sandbox.measure.inputs import fingerprint

        known = self.known_reference or []
        plan = self._trial_plan()
        if [(m.get("distribution"), m.get("seed")) for m in known] != plan:
            raise RuntimeError("protocol: the known reference's trials do not follow this trial plan")
        trials: list[dict[str, Any]] = []
        for entry in known:
            if entry.get("skipped"):
                continue
            try:
                inputs = self._draw_inputs(reference, entry)
            except Exception as e:
                raise CandidateError("reference", "the reference program failed: " + _digest_exception(e)) from e
            # As in _reference_trials: inputs too large to ship are drawn again for the candidate, not held.
            input_print = fingerprint(inputs) if self._drawn_again(inputs) else None
            trials.append(
                {
                    "index": entry["index"],
                    "inputs": inputs if input_print is None else None,
                    "mutates": entry["mutates_inputs"],
                    "distribution": entry["distribution"],
                    "seed": entry["seed"],
                    "input_print": input_print,
                }
            )
            del inputs
        self.backend.synchronize()
        self._lap("reference_trials_s")
        self.chan.send("reference", {"known": True, "phases": dict(self.phases)})
        return trials

    def _correctness(
        self, reference: types.ModuleType, ref_model: Any, new_model: Any, trials: list[dict[str, Any]]
    ) -> None:
        from rubric_rl.sandbox.checks.guard import GuardedCall
        from rubric_rl.sandbox.measure.inputs import (
            aliases,
            clone_inputs,
            describe,
            fingerprint,
            flatten_outputs,
            poison,
            same_bits,
            sample_pairs,
            storage_spans,
            to_host,
        )

        torch = self.torch
        params = (
            list(new_model.parameters()) + list(new_model.buffers()) if isinstance(new_model, torch.nn.Module) else []
        )
        for n, trial in enumerate(trials):
            if n:
                self._next_trial()
            inputs_intact = drawn = None
            if trial["inputs"] is None:
                # Drawn again (see _reference_trials): any change from the reference's draw means tampering. This
                # draw is the candidate's own copy, and its fingerprint tells afterwards whether the candidate
                # wrote into it: a second copy of inputs this large (6 GB on KernelBench L1-19) would not fit
                # beside the kept outputs in a share of the GPU.
                x = self._draw_inputs(reference, trial)
                drawn = fingerprint(x)
                inputs_intact = drawn == trial["input_print"]
            else:
                x = clone_inputs(trial["inputs"])
            # The inputs are complete before the candidate runs, so a candidate whose kernels run on a stream of
            # their own reads them whole every time: its verdict does not depend on a race it would win or lose
            # with the copy (the kernel profile then flags the side stream).
            self.backend.synchronize()
            spans_in = storage_spans(x)
            guard = GuardedCall()
            try:
                out = flatten_outputs(guard(new_model, *x))
                self.backend.synchronize()
            except Exception as e:
                raise CandidateError(f"correctness trial {trial['index']}", _digest_exception(e, "candidate.py")) from e
            body = {
                "index": trial["index"],
                "outputs": [describe(o) for o in out],
                "aliases_input": [aliases(o, spans_in) for o in out],
                "aliases_parameter": [aliases(o, storage_spans(params)) for o in out],
                "mutated_inputs": fingerprint(x) != drawn if drawn is not None else not same_bits(x, trial["inputs"]),
                "inputs_intact": inputs_intact,
                "ops": dict(guard.recorder.counts),
                "downcasts": dict(guard.recorder.downcasts),
                "guard_escaped": guard.escaped,
            }
            del x  # read for the last time: its memory is the reference's, if it runs again
            if trial["index"] in self.kept_refs:
                refs, printed = self.kept_refs.pop(trial["index"])
                if refs is None:
                    # Computed again only now that the candidate's output exists, so no reference output of
                    # this trial was on the device while the candidate ran.
                    try:
                        refs = self._reference_again(reference, ref_model, trial)
                    except Exception as e:
                        raise CandidateError(
                            f"correctness trial {trial['index']}",
                            "the reference failed when computed again after the candidate loaded: "
                            + _digest_exception(e),
                        ) from e
                host = self._compare_on_device(trial, out, refs, printed, body)
                if "sample_seed" in trial and not body["reference_intact"]:
                    # Other bits than before the candidate loaded: the evaluator tells a reference that does not
                    # reproduce them under other memory (cuDNN takes another algorithm when its workspace does not
                    # fit) from a tampered one by the positions it was sent then.
                    host += sample_pairs(refs, refs, trial["sample_seed"], REFERENCE_SAMPLES)[1]
                    body["reference_resampled"] = True
                poison(refs)  # its one use is over
            else:
                host = [to_host(o) for o in out]
            poison(
                [
                    o
                    for o, a, p in zip(out, body["aliases_input"], body["aliases_parameter"], strict=True)
                    if not (a or p)
                ]
            )
            # The trial's device work is over before the evaluator hears of it: it lets timings have the device
            # while it compares on the host, and this worker asks again before its next trial.
            self.backend.synchronize()
            self.chan.send("trial", body, tensors=host)
            del out, host

    def _next_trial(self) -> None:
        """Ask before the next trial; the evaluator answers once the device is ours again (a waiting timing
        may go first)."""
        self.chan.send("next_trial", {})
        reply = self._recv().type
        if reply != "go":
            raise RuntimeError(f"protocol: expected 'go' before the next trial, got {reply!r}")

    def _device_wanted(self) -> None:
        """Before one of torch.compile's GPU benchmarks: the evaluator answers once the device may be used (a
        timing in progress ends first). The wait is not the warm-up's (see ``_compile_reference``)."""
        self.chan.send("device_wanted", {})
        asked = time.monotonic()
        reply = self.chan.recv().type
        waited = time.monotonic() - asked
        self._gate_wait_s += waited
        self._mark += waited
        if reply != "go":
            raise RuntimeError(f"protocol: expected 'go' before a compile benchmark, got {reply!r}")

    def _device_released(self) -> None:
        self.chan.send("device_released", {})

    def _compare_on_device(
        self, trial: dict[str, Any], out: list[Any], refs: list[Any], printed: list[str], body: dict[str, Any]
    ) -> list[Any]:
        """Compare with a reference output on the device; returns the spot-check sample to send.

        The evaluator draws the sample's positions only now that the candidate's output exists, and checks
        the sampled values itself; the fingerprint says whether the reference output (kept, or computed
        again) differs from the one computed before the candidate was imported."""
        from rubric_rl.sandbox.measure.correctness import compare_outputs
        from rubric_rl.sandbox.measure.inputs import describe, fingerprint

        result = compare_outputs(
            body["outputs"],
            out,
            [describe(r) for r in refs],
            refs,
            self.cfg,
            index=trial["index"],
            distribution=trial["distribution"],
            seed=trial["seed"],
        )
        body["device_result"] = result.model_dump(mode="json")
        body["reference_intact"] = fingerprint(refs) == printed
        cs, rs = self._spot_sample(out, refs, {"index": trial["index"]})
        return cs + rs

    def _spot_sample(self, cand: list[Any], ref: list[Any], about: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """Host copies of both outputs at positions the evaluator draws now, after the candidate's output
        exists (so it cannot have been made right only there)."""
        from rubric_rl.sandbox.measure.inputs import sample_pairs

        self.chan.send("sample_request", about)
        reply = self.chan.recv()
        if reply.type != "sample":
            raise CandidateError(self.stage, f"expected a sample seed, got {reply.type!r}")
        return sample_pairs(cand, ref, int(reply.body["seed"]), int(reply.body["k"]))

    def _compile_reference(
        self, reference: types.ModuleType, ref_model: Any, init_inputs: list[Any], *, rearm: bool
    ) -> tuple[Any | None, dict[str, Any]]:
        """torch.compile of the reference, warmed up on one input: (compiled model or None, info)."""
        from rubric_rl.sandbox.measure.inputs import make_inputs
        from rubric_rl.sandbox.run.compile_gate import benchmarks_admitted

        torch = self.torch
        info: dict[str, Any] = {}
        self.audit.armed = False  # torch.compile spawns compiler processes and writes its cache: ours
        try:
            compiled = torch.compile(self._construct(reference.Model, init_inputs), mode=self.cfg.compile_mode)
            self._load_matching_state(ref_model, compiled)
            warm = make_inputs(
                reference,
                seed=self.cfg.seed + 5000,
                device=self.device,
                distribution="task",
                backend_seed=self.backend.seed,
            )
            started = time.monotonic()
            self._gate_wait_s = 0.0
            with benchmarks_admitted(self._device_wanted, self._device_released) as admitted:
                compiled(*warm)  # the compile, and its kernels' first launches (where Inductor benchmarks)
                self.backend.synchronize()
            # The warm-up's own time: what its benchmarks waited for the device was other evaluations'.
            info["warmup_s"] = time.monotonic() - started - self._gate_wait_s
            info["benchmarks"] = {"route": admitted.route, "admissions": admitted.admissions}
            self.phases["compile_gate_wait_s"] = round(self._gate_wait_s, 4)
            return compiled, info
        except Exception as e:  # the baseline failing is not the candidate's fault: recorded, not fatal
            info["error"] = _digest_exception(e)
            return None, info
        finally:
            self.audit.armed = rearm

    def _timing(
        self,
        reference: types.ModuleType,
        ref_model: Any,
        new_model: Any | None,
        init_inputs: list[Any],
        *,
        take_snapshot: Any | None,
        compiled: tuple[Any | None, dict[str, Any]] | None = None,
    ) -> None:
        """Time eager, compile (``compiled``: torch.compile of the reference, warmed up before the device was
        ours alone; None: the task's baseline is reused) and, unless measuring a task baseline, the candidate."""
        from rubric_rl.sandbox.checks.integrity import compare
        from rubric_rl.sandbox.measure.correctness import compare_outputs
        from rubric_rl.sandbox.measure.inputs import (
            clone_inputs,
            describe,
            flatten_outputs,
            make_inputs,
            nbytes,
            poison,
            to_host,
        )
        from rubric_rl.sandbox.measure.timing import choose_checked_rounds, host_probe, run_rounds

        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        models: dict[str, Any] = {"eager": ref_model}
        if new_model is not None:
            models["candidate"] = new_model
        compile_info: dict[str, Any] = {}
        if compiled is not None:
            compiled_model, compile_info = compiled
            if compiled_model is not None:
                models["compile"] = compiled_model
        snapshot = take_snapshot() if take_snapshot else None  # re-baseline: what torch.compile changed is ours

        timing_seed = self.cfg.seed + 10_000
        checked = (
            choose_checked_rounds(self.cfg.perf_trials, self.cfg.checked_timed_outputs, timing_seed)
            if new_model is not None
            else set()
        )
        checked_payload: list[list[Any]] = []
        checked_meta: list[dict[str, Any]] = []

        def fresh(r: int) -> list[Any]:
            return make_inputs(
                reference, seed=timing_seed + r, device=self.device, distribution="task", backend_seed=self.backend.seed
            )

        def on_checked(r: int, outputs: dict[str, Any]) -> None:
            cand = flatten_outputs(outputs["candidate"])
            eager = flatten_outputs(outputs["eager"])
            entry: dict[str, Any] = {"round": r, "seed": timing_seed + r}
            # Copying large outputs would hold the device for timing alone: compared here, then spot-checked by
            # the evaluator on positions it draws now. Eager's output is this process's either way.
            if nbytes(eager) + nbytes(cand) > self.cfg.ship_timed_outputs_max_mb * 2**20:
                result = compare_outputs(
                    [describe(o) for o in cand],
                    cand,
                    [describe(o) for o in eager],
                    eager,
                    self.cfg,
                    index=-1,
                    distribution="timed",
                    seed=timing_seed + r,
                )
                entry["device_result"] = result.model_dump(mode="json")
                cs, es = self._spot_sample(cand, eager, {"round": r})
                checked_payload.append([es, cs])
            else:
                checked_payload.append([[to_host(o) for o in eager], [to_host(o) for o in cand]])
            checked_meta.append(entry)

        def release(outputs: dict[str, Any]) -> None:
            for out in outputs.values():
                poison(flatten_outputs(out))

        try:
            probes = [host_probe(self.backend, self.device)]
            times = run_rounds(
                models,
                make_inputs=fresh,
                clone=clone_inputs,
                backend=self.backend,
                n_rounds=self.cfg.perf_trials,
                n_warmup=self.cfg.warmup_trials,
                min_seconds=self.cfg.min_timing_s,
                checked_rounds=checked,
                on_checked_round=on_checked,
                after_round=release,
            )
            probes.append(host_probe(self.backend, self.device))  # a device the candidate broke fails here too
        except Exception as e:
            raise CandidateError("timing", _digest_exception(e, "candidate.py")) from e
        self._lap("timing_rounds_s")
        self.chan.send("timed", {})  # the device is free from here: the checked outputs take a while to ship
        self.chan.send(
            "timing",
            {
                "phases": dict(self.phases),
                "times_ms": times,
                "compile": compile_info,
                "checked": checked_meta,
                "cpu_cores": cores,
                "host_probe": {k: round(sum(p[k] for p in probes) / len(probes), 5) for k in probes[0]},
                "integrity": compare(snapshot) if snapshot is not None else [],
                "audit": list(self.audit.violations),
            },
            tensors=checked_payload,
        )
        self._lap("timing_ship_s")

    def _profile(self, reference: types.ModuleType, new_model: Any) -> None:
        """One candidate forward under the CUDA profiler: each kernel's name, stream and device time."""
        import json

        from torch.profiler import ProfilerActivity, profile

        from rubric_rl.sandbox.measure.inputs import clone_inputs, make_inputs

        x = clone_inputs(
            make_inputs(
                reference,
                seed=self.cfg.seed + 20_000,
                device=self.device,
                distribution="task",
                backend_seed=self.backend.seed,
            )
        )
        trace = os.path.join(os.getcwd(), "profile.json")
        self.audit.armed = False  # the profiler's own setup reads system files and writes the trace
        try:
            marker = self.torch.zeros(1, device=self.device)
            self.backend.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                marker.fill_(1.0)  # the first kernel of the trace: it shows which stream is the current one
                self.audit.armed = True
                new_model(*x)
                self.backend.synchronize()
                self.audit.armed = False
            prof.export_chrome_trace(trace)
            with open(trace) as f:
                events = json.load(f).get("traceEvents", [])
            device_events = sorted(
                (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                key=lambda e: float(e.get("ts", 0.0)),
            )
            current_stream = -1
            kernels: dict[tuple[str, int], dict[str, Any]] = {}
            for evt in device_events:
                stream = int((evt.get("args") or {}).get("stream", -1))
                if current_stream == -1 and evt.get("cat") == "kernel":
                    current_stream = stream  # the marker
                    continue
                name = str(evt.get("name", ""))[:300]
                entry = kernels.setdefault(
                    (name, stream),
                    {"name": name, "stream": stream, "calls": 0, "total_us": 0.0, "kind": evt.get("cat")},
                )
                entry["calls"] += 1
                entry["total_us"] += float(evt.get("dur", 0.0))
        except Exception as e:
            self.chan.send("kernels", {"error": _digest_exception(e)})
            return
        finally:
            self.audit.armed = True
        self.chan.send("kernels", {"kernels": list(kernels.values()), "current_stream": current_stream})


def _violations(worker: Worker | None) -> list[str]:
    return list(worker.audit.violations) if worker is not None else []


def main(argv: list[str]) -> int:
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the evaluator asks "where are you?" on a timeout
    chan = Channel(int(argv[1]), int(argv[2]))
    import torch  # noqa: F401 - imported before the setup arrives, so a pre-started worker is warm

    if "--ahead" in argv[3:]:  # a spare, started before it is needed: what its first phases import lazily too
        import torch._dynamo  # noqa: F401 - the op guard's and the profiler's
    if "--compiles" in argv[3:]:  # a spare for a baseline: torch.compile's too (0.9 s on 2 cores; no CUDA context)
        import torch._inductor.compile_fx  # noqa: F401

    ready_at = time.monotonic()
    setup = chan.recv()
    worker: Worker | None = None
    try:
        worker = Worker(chan, setup.body)
        # How long the evaluation waited for this interpreter to import torch (a spare not yet ready).
        sent_at = setup.body.get("sent_at")
        if isinstance(sent_at, (int, float)):
            worker.phases["start_wait_s"] = round(max(0.0, ready_at - sent_at), 4)
        worker.run()
    except CandidateError as e:
        chan.send(
            "error",
            {
                "stage": e.stage,
                "message": e.message,
                "task_error": e.stage == "reference",
                "audit": _violations(worker),
            },
        )
    except BaseException as e:  # candidate code can raise anything, SystemExit and KeyboardInterrupt included
        stage = worker.stage if worker is not None else "setup"
        chan.send(
            "error",
            {
                "stage": stage,
                "message": _digest_exception(e, "candidate.py"),
                "infra": stage == "setup",
                "audit": _violations(worker),
            },
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: candidate atexit handlers and CUDA teardown must not run


if __name__ == "__main__":
    main(sys.argv)
