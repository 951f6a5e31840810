"""The reference phase: the reference's outputs for every trial, sent to the evaluator and poisoned before the
candidate is imported.

Above ``ship_outputs_max_mb`` they are compared in the worker instead, against their fingerprint from now. If the
reference reproduces its bits (tried once, on the first such trial), each is poisoned now and computed again
after the candidate's trial, from inputs drawn again; otherwise all are kept on the device until their trial.
Kept, KernelBench L1-19's seven 6 GB outputs beside a trial's inputs and the candidate's output needed all of an
H100, and each of its candidates ran alone.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from rubric_rl.sandbox.run.messages import Reference, ReferenceTrial
from rubric_rl.sandbox.run.worker.base import CandidateError, ReferenceModel, Session, digest_exception

# Positions of each large reference output sent to the evaluator before the candidate loads: what the output
# computed again after the candidate's trial is held to when it does not reproduce the bits (see correctness).
REFERENCE_SAMPLES = 1 << 16


@dataclass
class PlannedTrial:
    """A trial the candidate will run: its inputs held (a private copy is made for the candidate), or, too large
    to hold, drawn again from the seed and checked against ``input_print``."""

    index: int
    distribution: str
    seed: int
    mutates: bool
    inputs: list[Any] | None
    input_print: list[str] | None
    sample_seed: int | None = None  # a reference computed again: where its sample from before was drawn


class ReferencePhase:
    """The reference's trials, and the outputs kept for comparing in the worker (by trial index, with their
    fingerprint from before the candidate was imported; None for outputs computed again after its trial)."""

    def __init__(self, session: Session, ref: ReferenceModel) -> None:
        self.session = session
        self.ref = ref
        self.trials: list[PlannedTrial] = []
        self.kept_refs: dict[int, tuple[list[Any] | None, list[str]]] = {}
        self.recompute_large: bool | None = None  # whether kept outputs are computed again (decided on the first)

    def plan(self) -> list[tuple[str, int]]:
        cfg = self.session.cfg
        plan = [("task", cfg.seed + i) for i in range(cfg.correctness.trials)]
        plan += [(d, cfg.seed + 1000 + j) for j, d in enumerate(cfg.correctness.extra_distributions)]
        return plan

    def run(self) -> None:
        """Run the reference on every trial's inputs and send the evaluator its outputs (or, for a reference the
        evaluator knows, only draw the inputs)."""
        from rubric_rl.sandbox.measure.correctness import degenerate_task_flags

        session = self.session
        if session.setup.known_reference is not None:
            self._known(session.setup.known_reference)
            return
        meta: list[ReferenceTrial] = []
        payload: list[list[Any]] = []
        kept_task_samples: list[list[Any]] = []
        for index, (distribution, seed) in enumerate(self.plan()):
            if index:
                session.next_trial()
            entry, shipped, sample = self._one(index, distribution, seed)
            meta.append(entry)
            payload.append(shipped)
            if sample is not None:
                kept_task_samples.append(sample)
        flags = degenerate_task_flags(kept_task_samples, session.cfg) if kept_task_samples else []
        session.lap("reference_trials_s")
        session.send(Reference(trials=meta, kept_task_flags=flags, phases=dict(session.phases)), tensors=payload)
        del payload
        session.backend.poison_free_memory()

    def _one(self, index: int, distribution: str, seed: int) -> tuple[ReferenceTrial, list[Any], list[Any] | None]:
        """One trial of the reference: its record, what of its outputs is shipped, and (a kept trial on the task's
        own inputs) a subsample of them for the degeneracy flags."""
        from rubric_rl.sandbox.measure.inputs import (
            clone_inputs,
            describe,
            fingerprint,
            flatten_outputs,
            nbytes,
            poison,
            same_bits,
            subsample,
            to_host,
        )

        session, torch = self.session, self.session.torch
        try:
            inputs = session.draw(self.ref.module, seed, distribution)
            # Inputs too large to ship are drawn again for the candidate rather than held: seven trials of kept
            # outputs and held inputs do not fit on one GPU. Those the reference runs on as they are, their
            # fingerprint telling whether it wrote into them (a second copy of KernelBench L1-19's 6 GB inputs
            # beside its kept outputs overran half an H200).
            input_print = fingerprint(inputs) if self.drawn_again(inputs) else None
            x = clone_inputs(inputs) if input_print is None else inputs
            out = flatten_outputs(self.ref.model(*x))
            session.backend.synchronize()
        except Exception as e:
            raise CandidateError("reference", "the reference program failed: " + digest_exception(e)) from e
        finite = all(
            bool(torch.isfinite(o).all())
            for o in out
            if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex())
        )
        skip = distribution != "task" and not finite
        keep = not skip and nbytes(out) > session.cfg.ship_outputs_limit_bytes()
        entry = ReferenceTrial(
            index=index,
            distribution=distribution,
            seed=seed,
            finite=finite,
            outputs=[describe(o) for o in out],
            mutates_inputs=not same_bits(x, inputs) if input_print is None else fingerprint(x) != input_print,
            on_device=keep,
            skipped="the reference is not finite on these inputs" if skip else None,
        )
        printed: list[str] = []
        sample = None
        if keep:  # compared in the worker, on the device; the evaluator spot-checks (see correctness)
            printed = fingerprint(out)
            sample = [subsample(o) for o in out] if distribution == "task" else None
            shipped: list[Any] = []
            # Drawn again for the candidate (and must come out the same) beside kept outputs, however small.
            input_print = input_print if input_print is not None else fingerprint(inputs)
        else:
            shipped = [] if skip else [to_host(o) if isinstance(o, torch.Tensor) else None for o in out]
            poison(out)
        held = inputs if input_print is None else None
        kept = out if keep else None
        del out, x, inputs
        if skip:
            return entry, shipped, sample
        trial = PlannedTrial(index, distribution, seed, entry.mutates_inputs, held, input_print)
        self.trials.append(trial)
        if kept is not None:
            shipped = self._keep(trial, entry, kept, printed)
        return entry, shipped, sample

    def _keep(self, trial: PlannedTrial, entry: ReferenceTrial, kept: list[Any], printed: list[str]) -> list[Any]:
        """Keep a large output for its trial, or, if the reference reproduces its bits, poison it now and ship a
        sample of it (what the output computed again is held to if its bits differ); returns what is shipped."""
        from rubric_rl.sandbox.measure.inputs import poison, sample_pairs

        shipped: list[Any] = []
        if self.recompute_large is None:
            self.recompute_large = self._reproduces(trial, printed)
        entry.recomputed = self.recompute_large
        if self.recompute_large:
            trial.sample_seed = secrets.randbits(62)
            shipped = sample_pairs(kept, kept, trial.sample_seed, REFERENCE_SAMPLES)[1]
            poison(kept)
            self.kept_refs[trial.index] = (None, printed)
        else:
            self.kept_refs[trial.index] = (kept, printed)
        return shipped

    def _known(self, known: list[ReferenceTrial]) -> None:
        """The trials of a reference the evaluator already knows: the same seeded inputs, no reference run."""
        from rubric_rl.sandbox.measure.inputs import fingerprint

        session = self.session
        if [(m.distribution, m.seed) for m in known] != self.plan():
            raise RuntimeError("protocol: the known reference's trials do not follow this trial plan")
        for entry in known:
            if entry.skipped:
                continue
            try:
                inputs = session.draw(self.ref.module, entry.seed, entry.distribution)
            except Exception as e:
                raise CandidateError("reference", "the reference program failed: " + digest_exception(e)) from e
            # As in _one: inputs too large to ship are drawn again for the candidate, not held.
            input_print = fingerprint(inputs) if self.drawn_again(inputs) else None
            held = inputs if input_print is None else None
            self.trials.append(
                PlannedTrial(entry.index, entry.distribution, entry.seed, entry.mutates_inputs, held, input_print)
            )
            del inputs, held
        session.backend.synchronize()
        session.lap("reference_trials_s")
        session.send(Reference(known=True, phases=dict(session.phases)))

    def drawn_again(self, inputs: list[Any]) -> bool:
        """Inputs this large are drawn again for the candidate's trial rather than held or copied."""
        from rubric_rl.sandbox.measure.inputs import nbytes

        return nbytes(inputs) > self.session.cfg.ship_outputs_limit_bytes()

    def again(self, trial: PlannedTrial) -> list[Any]:
        """The reference's outputs on a large trial's inputs, drawn again (its inputs are never held)."""
        from rubric_rl.sandbox.measure.inputs import flatten_outputs

        x = self.session.draw(self.ref.module, trial.seed, trial.distribution)
        out = flatten_outputs(self.ref.model(*x))
        self.session.backend.synchronize()
        return out

    def _reproduces(self, trial: PlannedTrial, printed: list[str]) -> bool:
        """Whether the reference, run again on a trial's inputs, gives the same bits, before the candidate loads:
        only then may a changed fingerprint after the candidate's trial be called tampering (a reference with
        nondeterministic kernels, atomics in a reduction, keeps its outputs instead)."""
        from rubric_rl.sandbox.measure.inputs import fingerprint, poison

        try:
            again = self.again(trial)
        except Exception as e:
            raise CandidateError("reference", "the reference program failed: " + digest_exception(e)) from e
        same = fingerprint(again) == printed
        poison(again)
        return same

    def release(self) -> None:
        """After the correctness trials: timing needs the memory, and nothing may find the outputs later."""
        from rubric_rl.sandbox.measure.inputs import poison

        for refs, _ in self.kept_refs.values():
            if refs is not None:
                poison(refs)
        self.kept_refs.clear()
        self.trials.clear()
