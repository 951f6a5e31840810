"""From samples to a Judgment: per-dimension means, the weighted total, and the rubric's gates.

Shared by every judge so that a rubric means the same thing whoever scores it. When no sample succeeded the
scores are each dimension's neutral (middle) level and ``judge_failed`` is set: a recorded fallback, never an
exception and never a silent zero. Gates that read only the Verdict still apply to a fallback (they do not
depend on the judge); gates on the judge's flags or scores do not.
"""

from __future__ import annotations

from collections import Counter
from fnmatch import fnmatch

from rubric_rl.judge.record import DimensionScore, GateResult, JudgeIdentity, Judgment, SampleRecord, Usage
from rubric_rl.judge.request import JudgeRequest
from rubric_rl.judge.rubric import Gate, Rubric
from rubric_rl.sandbox.verdict import Verdict


def _dimension_scores(rubric: Rubric, ok: list[SampleRecord]) -> list[DimensionScore]:
    out = []
    for d in rubric.dimensions:
        if ok:
            values = [s.scores[d.name] for s in ok]
            mean = sum(values) / len(values)
            closest = min(ok, key=lambda s: abs(s.scores[d.name] - mean))
            rationale = closest.rationales.get(d.name, "")
        else:
            values, mean = [], d.neutral_score
            rationale = "judge failed: neutral fallback score, not a judgment of the candidate"
        out.append(
            DimensionScore(
                name=d.name,
                score=mean,
                normalised=d.normalise(mean),
                weight=d.weight,
                min_score=d.min_score,
                max_score=d.max_score,
                sample_scores=values,
                rationale=rationale,
            )
        )
    return out


def weighted_total(dimensions: list[DimensionScore]) -> float:
    weight = sum(d.weight for d in dimensions)
    return min(1.0, max(0.0, sum(d.weight * d.normalised for d in dimensions) / weight))


def _gate_reasons(gate: Gate, ok: list[SampleRecord], scores: dict[str, float], verdict: Verdict | None) -> list[str]:
    reasons: list[str] = []
    if gate.judge_flag and ok:
        raised = sum(bool(s.flags.get(gate.name)) for s in ok)
        if raised / len(ok) >= gate.quorum:
            reasons.append(f"judge flag {gate.name} raised in {raised}/{len(ok)} sample(s)")
    if verdict is not None:
        if verdict.status in gate.verdict_status:
            reasons.append(f"Verdict status {verdict.status}")
        matched = sorted({f.rule for f in verdict.findings if any(fnmatch(f.rule, p) for p in gate.verdict_rules)})
        if matched:
            reasons.append(f"Verdict finding(s) {', '.join(matched)}")
        share = verdict.own_kernel_time_share
        if gate.own_kernel_share_below is not None and share is not None and share < gate.own_kernel_share_below:
            reasons.append(f"own-kernel share of GPU time {share:.0%} < {gate.own_kernel_share_below:.0%}")
    if ok:
        for dim, threshold in gate.score_at_most.items():
            if scores[dim] <= threshold:
                reasons.append(f"{dim} score {scores[dim]:g} <= {threshold}")
    return reasons


def apply_gates(
    rubric: Rubric, raw_total: float, ok: list[SampleRecord], scores: dict[str, float], verdict: Verdict | None
) -> tuple[list[GateResult], float]:
    results, total = [], raw_total
    for gate in rubric.gates:
        reasons = _gate_reasons(gate, ok, scores, verdict)
        if reasons:
            total = 0.0 if gate.effect == "zero" else min(total, gate.cap if gate.cap is not None else total)
        results.append(
            GateResult(name=gate.name, fired=bool(reasons), effect=gate.effect, cap=gate.cap, reasons=reasons)
        )
    return results, total


def _failure_summary(samples: list[SampleRecord]) -> str:
    counts = Counter(s.error or "unknown" for s in samples)
    parts = ", ".join(f"{n}x {err}" for err, n in counts.most_common())
    last = next((s.error_detail for s in reversed(samples) if s.error_detail), None)
    return f"all {len(samples)} sample(s) failed ({parts})" + (f"; last error: {last}" if last else "")


def assemble(
    rubric: Rubric,
    identity: JudgeIdentity,
    request: JudgeRequest,
    samples: list[SampleRecord],
    *,
    latency_s: float,
    prompt_sha256: str | None = None,
    notes: list[str] | None = None,
) -> Judgment:
    """The Judgment for a request from its samples (failed ones included)."""
    ok = [s for s in samples if s.ok]
    dimensions = _dimension_scores(rubric, ok)
    raw_total = weighted_total(dimensions)
    gates, total = apply_gates(rubric, raw_total, ok, {d.name: d.score for d in dimensions}, request.verdict)
    notes = list(notes or [])
    failed = len(samples) - len(ok)
    if ok and failed:
        notes.append(f"{failed}/{len(samples)} sample(s) failed; the scores average the {len(ok)} that succeeded")
    usage = Usage()
    for s in samples:
        usage = usage + s.usage
    return Judgment(
        identity=identity,
        task_id=request.task_id,
        skill=request.skill,
        candidate_sha256=request.candidate_sha256,
        prompt_sha256=prompt_sha256,
        dimensions=dimensions,
        raw_total=raw_total,
        total=total,
        gates=gates,
        judge_failed=not ok,
        failure=None if ok else _failure_summary(samples),
        samples=samples,
        usage=usage,
        latency_s=latency_s,
        verdict_status=request.verdict.status if request.verdict is not None else None,
        notes=notes,
    )
