"""The candidate's correctness trials: each on its own copy of the reference's inputs, under the op recorder; its
outputs shipped to the evaluator, or, where the reference's were kept, compared here and spot-checked there."""

from __future__ import annotations

from typing import Any

from rubric_rl.sandbox.run.messages import SampleRequest, Trial
from rubric_rl.sandbox.run.worker.base import CandidateError, Session, digest_exception
from rubric_rl.sandbox.run.worker.reference import REFERENCE_SAMPLES, PlannedTrial, ReferencePhase


def run_candidate_trials(session: Session, phase: ReferencePhase, new_model: Any) -> None:
    torch = session.torch
    params = list(new_model.parameters()) + list(new_model.buffers()) if isinstance(new_model, torch.nn.Module) else []
    for n, trial in enumerate(phase.trials):
        if n:
            session.next_trial()
        _one(session, phase, new_model, params, trial)


def _one(session: Session, phase: ReferencePhase, new_model: Any, params: list[Any], trial: PlannedTrial) -> None:
    from rubric_rl.sandbox.checks.guard import GuardedCall
    from rubric_rl.sandbox.measure.inputs import (
        aliases,
        clone_inputs,
        describe,
        fingerprint,
        flatten_outputs,
        poison,
        same_bits,
        storage_spans,
        to_host,
    )

    inputs_intact = drawn = None
    if trial.inputs is None:
        # Drawn again (see reference): any change from the reference's draw means tampering. This draw is the
        # candidate's own copy, and its fingerprint tells afterwards whether the candidate wrote into it: a second
        # copy of inputs this large (6 GB on KernelBench L1-19) would not fit beside the kept outputs in a share
        # of the GPU.
        x = session.draw(phase.ref.module, trial.seed, trial.distribution)
        drawn = fingerprint(x)
        inputs_intact = drawn == trial.input_print
    else:
        x = clone_inputs(trial.inputs)
    # The inputs are complete before the candidate runs, so a candidate whose kernels run on a stream of their own
    # reads them whole every time: its verdict does not depend on a race it would win or lose with the copy (the
    # kernel profile then flags the side stream).
    session.backend.synchronize()
    spans_in = storage_spans(x)
    guard = GuardedCall()
    try:
        out = flatten_outputs(guard(new_model, *x))
        session.backend.synchronize()
    except Exception as e:
        raise CandidateError(f"correctness trial {trial.index}", digest_exception(e, "candidate.py")) from e
    body = Trial(
        index=trial.index,
        outputs=[describe(o) for o in out],
        aliases_input=[aliases(o, spans_in) for o in out],
        aliases_parameter=[aliases(o, storage_spans(params)) for o in out],
        mutated_inputs=fingerprint(x) != drawn if drawn is not None else not same_bits(x, trial.inputs or []),
        inputs_intact=inputs_intact,
        ops=dict(guard.recorder.counts),
        downcasts=dict(guard.recorder.downcasts),
        guard_escaped=guard.escaped,
    )
    del x  # read for the last time: its memory is the reference's, if it runs again
    if trial.index in phase.kept_refs:
        host = _compare_kept(session, phase, trial, out, body)
    else:
        host = [to_host(o) for o in out]
    poison([o for o, a, p in zip(out, body.aliases_input, body.aliases_parameter, strict=True) if not (a or p)])
    # The trial's device work is over before the evaluator hears of it: it lets timings have the device while it
    # compares on the host, and this worker asks again before its next trial.
    session.backend.synchronize()
    session.send(body, tensors=host)
    del out, host


def _compare_kept(
    session: Session, phase: ReferencePhase, trial: PlannedTrial, out: list[Any], body: Trial
) -> list[Any]:
    """Compare with the reference output kept (or computed again now) on the device; returns what is shipped: the
    spot-check sample, and, for a reference computed again with other bits, its positions sampled before."""
    from rubric_rl.sandbox.measure.inputs import poison, sample_pairs

    refs, printed = phase.kept_refs.pop(trial.index)
    if refs is None:
        # Computed again only now that the candidate's output exists, so no reference output of this trial was on
        # the device while the candidate ran.
        try:
            refs = phase.again(trial)
        except Exception as e:
            raise CandidateError(
                f"correctness trial {trial.index}",
                "the reference failed when computed again after the candidate loaded: " + digest_exception(e),
            ) from e
    host = _compare_on_device(session, trial, out, refs, printed, body)
    if trial.sample_seed is not None and not body.reference_intact:
        # Other bits than before the candidate loaded: the evaluator tells a reference that does not reproduce them
        # under other memory (cuDNN takes another algorithm when its workspace does not fit) from a tampered one
        # by the positions it was sent then.
        host += sample_pairs(refs, refs, trial.sample_seed, REFERENCE_SAMPLES)[1]
        body.reference_resampled = True
    poison(refs)  # its one use is over
    return host


def _compare_on_device(
    session: Session, trial: PlannedTrial, out: list[Any], refs: list[Any], printed: list[str], body: Trial
) -> list[Any]:
    """Compare with a reference output on the device; returns the spot-check sample to send.

    The evaluator draws the sample's positions only now that the candidate's output exists, and checks the
    sampled values itself; the fingerprint says whether the reference output (kept, or computed again) differs
    from the one computed before the candidate was imported."""
    from rubric_rl.sandbox.measure.correctness import compare_outputs
    from rubric_rl.sandbox.measure.inputs import describe, fingerprint

    body.device_result = compare_outputs(
        body.outputs,
        out,
        [describe(r) for r in refs],
        refs,
        session.cfg,
        index=trial.index,
        distribution=trial.distribution,
        seed=trial.seed,
    )
    body.reference_intact = fingerprint(refs) == printed
    cs, rs = session.spot_sample(out, refs, SampleRequest(index=trial.index))
    return cs + rs
