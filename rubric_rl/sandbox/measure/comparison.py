"""The evaluator's comparisons of what the worker sends: shipped outputs compared here, and the worker's own
comparisons (outputs too large to ship) taken only when the evaluator's spot check of positions it drew after
the output existed agrees."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from rubric_rl.sandbox.measure.correctness import compare_host_outputs, compare_outputs
from rubric_rl.sandbox.run.messages import CheckedRound, OutputInfo, ReferenceTrial, Sample, Trial
from rubric_rl.sandbox.run.protocol import ProtocolError
from rubric_rl.sandbox.run.state import RunState
from rubric_rl.sandbox.verdict import TrialResult

SPOT_CHECK_SAMPLES = 1 << 16  # positions per output the evaluator checks itself when a trial is compared in the worker


def draw_sample() -> Sample:
    """Where the worker samples an output compared there: drawn now, after the candidate's output exists."""
    return Sample(seed=secrets.randbits(62), k=SPOT_CHECK_SAMPLES)


def compare_trial(
    run: RunState, body: Trial, values: list[Any], ref: ReferenceTrial, compare: ThreadPoolExecutor
) -> None:
    """Compare a candidate trial with the reference's: shipped outputs on ``compare``, beside the worker's next
    trial (it waits for our "go", not for this comparison: for 256 MB outputs on the host, about as long as the
    trial's own device work, transfer included); a kept reference's trial from the worker's result."""
    run.compared()  # one comparison at a time: two trials' outputs on the host at most
    if ref.on_device:
        run.trials.append(compare_kept_trial(run, body, values, ref))
        return
    expected = run.ref_values[body.index]
    if not (matches_records(body.outputs, values) and matches_records(ref.outputs, expected)):
        raise ProtocolError(f"trial {body.index}: its outputs' values do not match their records")
    run.comparing = compare.submit(
        compare_outputs,
        body.outputs,
        values,
        ref.outputs,
        expected,
        run.config,
        index=body.index,
        distribution=ref.distribution,
        seed=ref.seed,
    )


def matches_records(records: Sequence[OutputInfo], values: list[Any]) -> bool:
    """Whether shipped values are what their records say: one per output, each tensor of its recorded shape and
    dtype (or None, where it could not be read back)."""
    if len(values) != len(records):
        return False
    for record, value in zip(records, values, strict=True):
        if isinstance(value, torch.Tensor):
            if (
                record["kind"] != "tensor"
                or list(value.shape) != record["shape"]
                or str(value.dtype) != record["dtype"]
            ):
                return False
        elif value is not None:
            return False
    return True


def compare_kept_trial(run: RunState, body: Trial, values: list[Any], ref: ReferenceTrial) -> TrialResult:
    """A trial compared in the worker (its reference was too large to ship): take the worker's result only if the
    reference output it compared against is the one from before the candidate loaded (kept, or computed again
    after the candidate's trial) and our own check of the sampled positions agrees."""
    index = body.index
    recomputed = bool(ref.recomputed)  # from the reference's own report, before the candidate loaded
    again: list[Any] = []  # the output computed again, at the positions sampled before the candidate loaded
    if body.reference_resampled:
        n = len(ref.outputs)
        if not recomputed or not n or len(values) < n:
            raise ProtocolError(f"trial {index}: a resample of a reference that was not computed again")
        values, again = values[:-n], values[-n:]
    if body.device_result is None or len(values) % 2:
        raise ProtocolError(f"trial {index}: a kept-reference trial without its result or sample")
    result = body.device_result.model_copy(
        update={
            "index": index,
            "distribution": ref.distribution,
            "seed": ref.seed,
            "compared_in": "worker",
            "reference_recomputed": recomputed,
        }
    )
    if not body.reference_intact:
        agrees = _agrees_with_before(run, run.ref_values[index], again) if again else None
        if agrees is None:
            what = (
                "computed again after the candidate's trial differs from the one before it loaded (the "
                "reference, its parameters or its inputs were tampered with)"
                if recomputed
                else "kept on the device changed while the candidate ran"
            )
            run.add_finding("protocol.tampering", "protocol", f"trial {index}: the reference output {what}")
            return result.model_copy(update={"passed": False, "error": "the reference output was changed"})
        run.add_finding(
            "protocol.reference_not_reproduced",
            "protocol",
            f"trial {index}: the reference output computed again after the candidate's trial has other bits "
            f"than before it loaded, but agrees within tolerance at {agrees} positions sampled then (another "
            "algorithm under other memory, e.g. cuDNN's when its workspace does not fit)",
            default="warn",
        )
    half = len(values) // 2
    return spot_check(run, result, values[:half], values[half:], f"trial {index}")


def _agrees_with_before(run: RunState, before: list[Any], again: list[Any]) -> int | None:
    """Positions checked if a reference output computed again agrees, within tolerance, with the sample of it
    sent before the candidate loaded; None if it does not (or there is nothing to check)."""
    pairs = [(a, b) for a, b in zip(again, before, strict=False) if isinstance(b, torch.Tensor)]
    if len(again) != len(before) or not pairs:
        return None
    loose = run.config.updated(correctness={"atol_scale": None})
    for a, b in pairs:
        if not isinstance(a, torch.Tensor) or a.shape != b.shape:
            return None
        if not compare_host_outputs([a], [b], loose, index=-1, distribution="task", seed=0).passed:
            return None
    return sum(b.numel() for _, b in pairs)


def spot_check(run: RunState, result: TrialResult, cand: list[Any], ref: list[Any], what: str) -> TrialResult:
    """The worker's comparison, unless the evaluator's own one of the sampled positions contradicts it."""
    if len(cand) != len(ref):
        raise ProtocolError(f"{what}: a spot-check sample without its pairs")
    if result.passed and result.numel and not any(isinstance(c, torch.Tensor) for c in cand):
        raise ProtocolError(f"{what}: a passing comparison in the worker came without its spot-check sample")
    loose = run.config.updated(correctness={"atol_scale": None})  # the full check's RMS cap only tightens
    for i, (c, r) in enumerate(zip(cand, ref, strict=True)):
        if not (isinstance(c, torch.Tensor) and isinstance(r, torch.Tensor)):
            continue
        spot = compare_host_outputs([c], [r], loose, index=result.index, distribution=result.distribution, seed=0)
        if not spot.passed and result.passed:
            run.add_finding(
                "protocol.comparison_mismatch",
                "protocol",
                f"{what}, output {i}: the worker's comparison passed but the evaluator's spot check of "
                f"{c.numel()} sampled positions failed ({spot.error})",
            )
            return result.model_copy(update={"passed": False, "error": f"spot check failed: {spot.error}"})
    return result


def check_timed_rounds(run: RunState, checked: list[CheckedRound], values: list[Any]) -> None:
    """The timed rounds whose outputs were checked: each a trial of its own; a wrong one is a finding, since the
    candidate passed its correctness trials."""
    for meta, pair in zip(checked, values, strict=False):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, list) for p in pair)):
            raise ProtocolError(f"timed round {meta.round}: its outputs do not come as an (eager, candidate) pair")
        eager_out, cand_out = pair
        if meta.device_result is not None:  # too large to copy while timing: compared in the worker, spot-checked
            result = meta.device_result.model_copy(
                update={"index": len(run.trials), "distribution": "timed", "seed": meta.seed, "compared_in": "worker"}
            )
            result = spot_check(run, result, cand_out, eager_out, f"timed round {meta.round}")
        else:
            result = compare_host_outputs(
                cand_out, eager_out, run.config, index=len(run.trials), distribution="timed", seed=meta.seed
            )
        run.trials.append(result)
        if not result.passed:
            run.add_finding(
                "protocol.timed_output_mismatch",
                "protocol",
                f"timed round {meta.round}: the candidate's output was wrong ({result.error}) although "
                "it passed the correctness trials",
            )
