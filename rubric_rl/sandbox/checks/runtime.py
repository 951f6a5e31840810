"""What the worker's runtime records say about the candidate: the findings of its guards, read by the evaluator.

The worker only records (ops dispatched, precision downcasts, outputs aliasing inputs or parameters, inputs
written into, in-process changes, refused operations, the profiled kernels); the rules and their severities
are applied here, on the trusted side.
"""

from __future__ import annotations

from rubric_rl.sandbox.checks.guard import forbidden_ops
from rubric_rl.sandbox.measure.profiling import attribute_kernels, side_streams
from rubric_rl.sandbox.run.messages import Kernels, ReferenceTrial, Trial
from rubric_rl.sandbox.run.state import RunState
from rubric_rl.sandbox.verdict import Finding


def check_trial(run: RunState, body: Trial, ref: ReferenceTrial, *, first: bool) -> None:
    """The findings of one candidate trial; the ops of the ``first`` to arrive are checked against the policy."""
    index = body.index
    for op, n in body.ops.items():
        run.aten_ops[op] = max(run.aten_ops.get(op, 0), n)
    if first:
        _check_first_trial(run, body)
    if body.guard_escaped:
        run.add_finding("runtime.guard_escaped", "runtime", f"the op recorder was tampered with: {body.guard_escaped}")
    if body.inputs_intact is False:
        run.add_finding(
            "protocol.tampering",
            "protocol",
            f"trial {index}: the inputs drawn again for the candidate differ from the reference's "
            "(the random generator or get_inputs was tampered with)",
        )
    if body.mutated_inputs and not ref.mutates_inputs:
        run.add_finding(
            "runtime.input_mutation",
            "runtime",
            f"trial {index}: the candidate wrote into its inputs (the reference does not)",
        )
    if any(body.aliases_input):
        run.add_finding(
            "runtime.output_aliases_input", "runtime", f"trial {index}: an output shares memory with an input"
        )
    if any(body.aliases_parameter):
        run.add_finding(
            "runtime.output_aliases_parameter",
            "runtime",
            f"trial {index}: an output shares memory with a parameter or buffer (a stored answer)",
        )
    tensors = [o for o in body.outputs if o["kind"] == "tensor"]
    if any(not o["plain"] for o in tensors):
        run.add_finding(
            "runtime.output_not_plain_tensor",
            "runtime",
            f"trial {index}: an output is not a plain torch.Tensor",
            evidence=", ".join(o["type"] for o in tensors),
        )
    run.findings = dedupe_findings(run.findings)


def _check_first_trial(run: RunState, body: Trial) -> None:
    bad = forbidden_ops(body.ops, run.config.policy.allowed_aten_ops)
    if bad:
        run.add_finding(
            "runtime.aten_fallback",
            "runtime",
            f"the forward ran PyTorch compute ops: {', '.join(sorted(bad))}",
            evidence=", ".join(f"aten::{k} x{v}" for k, v in bad.items()),
        )
    if body.downcasts:
        run.add_finding(
            "runtime.precision_downgrade",
            "runtime",
            "the forward converted float tensors to lower precision",
            evidence=", ".join(f"{k} x{v}" for k, v in body.downcasts.items()),
        )
    if any(o["kind"] == "tensor" for o in body.outputs) and not body.ops:
        run.add_finding(
            "runtime.no_dispatch",
            "runtime",
            "the forward returned tensors without any ATen op: its outputs were made ahead of time or the "
            "dispatcher was bypassed",
        )


def check_integrity(run: RunState, integrity: list[str], audit: list[str]) -> None:
    """In-process changes the worker's snapshots saw, and the operations its audit hook refused (each once)."""
    for change in integrity:
        if change not in run.seen_integrity:
            run.seen_integrity.add(change)
            run.add_finding("protocol.tampering", "protocol", f"in-process state changed: {change}", evidence=change)
    check_audit(run, audit)


def check_audit(run: RunState, audit: list[str]) -> None:
    for what in audit:
        if what not in run.seen_audit:
            run.seen_audit.add(what)
            run.add_finding("runtime.forbidden_operation", "runtime", f"the candidate attempted {what}", evidence=what)


def check_profile(run: RunState, body: Kernels) -> None:
    """The profiled forward's kernels attributed, and the policy on them: the candidate's own share of the GPU
    time, library kernels, kernels on a stream other than the current one."""
    policy = run.config.policy
    if body.error is not None:
        run.error(f"kernel profile failed: {body.error}")
        return
    events = [k.model_dump() for k in body.kernels]
    run.kernels, run.own_share = attribute_kernels(events, run.kernel_names)
    share = run.own_share or 0.0
    if policy.min_own_kernel_share > 0 and share < policy.min_own_kernel_share:
        run.add_finding(
            "kernels.low_own_share",
            "kernels",
            f"only {100 * share:.1f}% of the forward's GPU time is in the candidate's own kernels "
            f"(policy minimum {100 * policy.min_own_kernel_share:.0f}%)",
        )
    library = [k for k in run.kernels if k.owner == "library"]
    if library:
        allowed = bool(policy.allowed_libraries or policy.allowed_aten_ops)
        run.add_finding(
            "kernels.library_kernels",
            "kernels",
            "library kernels (cuBLAS/cuDNN/CUTLASS) ran during the candidate's forward"
            + ("" if allowed else ", and the policy allows no library"),
            default="warn" if allowed else "error",
            evidence=", ".join(k.name[:80] for k in library[:5]),
        )
    current = body.current_stream
    others = side_streams(events, current) if current >= 0 else set()
    if others:
        run.add_finding(
            "kernels.side_stream",
            "kernels",
            "kernels ran on a stream other than the current one (work hidden from stream timing)",
            evidence=f"current stream {current}, others {sorted(others)}",
        )


def dedupe_findings(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and message, the trial number of a trial's message aside."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.rule, f.message.split(":", 1)[-1] if f.message.startswith("trial ") else f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
