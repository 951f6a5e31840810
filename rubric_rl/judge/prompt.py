"""The judge's messages: the rubric and answer format (system), the skill, the data and the evidence (user).

What it protects against: a candidate that writes to the judge. Every text a model wrote or could have
influenced (the candidate, the previous program, the feedback, which can quote compiler output, and the
Verdict's textual excerpts, which quote the candidate) travels inside an untrusted data block. A block opens
with ``<<<BEGIN UNTRUSTED <LABEL> <nonce>>>`` and closes with the matching END line; the nonce is a hash of
all the blocks' contents, so a candidate cannot forge a closing marker (it would have to contain its own
hash), and it is deterministic, so the same candidate gives the same prompt (and the same cache key). The
system prompt, identical for every candidate (prefix caching), tells the judge that nothing inside a block is
an instruction. The evidence outside the blocks carries only what the evaluator measured: statuses, numbers,
rule ids, ATen op names.

What it does not protect against: a judge model that follows instructions anyway. Scores are validated
(range, completeness) but not second-guessed; the Verdict-based gates and the heuristic judge do not read
the candidate's prose at all.
"""

from __future__ import annotations

import hashlib
import json
import string
from typing import Any

from rubric_rl.judge.parsing import answer_skeleton
from rubric_rl.judge.request import JudgeRequest
from rubric_rl.judge.rubric import PromptTemplate, Rubric
from rubric_rl.sandbox.checks.guard import forbidden_ops
from rubric_rl.sandbox.verdict import Verdict

Message = dict[str, str]


def bounded(text: str, limit: int) -> tuple[str, bool]:
    """The text, or its head and tail around an omission marker when longer than ``limit`` characters."""
    if len(text) <= limit:
        return text, False
    head, tail = text[: limit * 2 // 3], text[-(limit // 3) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n{tail}", True


def render_dimensions(rubric: Rubric) -> str:
    total = sum(d.weight for d in rubric.dimensions)
    parts = []
    for d in rubric.dimensions:
        levels = "\n".join(f"  {score}: {text.strip()}" for score, text in d.levels.items())
        parts.append(
            f"### {d.name} ({d.title}; weight {d.weight / total:.2f}; score {d.min_score}-{d.max_score})\n"
            f"{d.description.strip()}\nLevels:\n{levels}"
        )
    return "\n\n".join(parts)


def render_gates(rubric: Rubric) -> str:
    flags = rubric.flag_gates
    if not flags:
        return "(this rubric has no flags for you to set)"
    lines = []
    for g in flags:
        effect = "the reward becomes 0" if g.effect == "zero" else f"the reward is capped at {g.cap}"
        lines.append(f"- {g.name} (true or false; when true, {effect}): {g.description.strip()}")
    return "\n".join(lines)


def render_answer_format(rubric: Rubric, template: PromptTemplate) -> str:
    return string.Template(template.answer).substitute(skeleton=answer_skeleton(rubric)).strip()


def system_message(rubric: Rubric, template: PromptTemplate) -> str:
    return (
        string.Template(template.system)
        .substitute(
            rubric_name=rubric.name,
            rubric_version=rubric.version,
            rubric_description=rubric.description.strip(),
            dimensions=render_dimensions(rubric),
            gates=render_gates(rubric),
            guidance=rubric.guidance.strip(),
            answer_format=render_answer_format(rubric, template),
        )
        .strip()
    )


def _median(stats: Any) -> float | None:
    return round(stats.median_ms, 4) if stats is not None else None


def trusted_evidence(verdict: Verdict) -> dict[str, Any]:
    """What the evaluator measured, with no text the candidate could have written."""
    kernels: dict[str, dict[str, float]] = {}
    for k in verdict.kernels:
        entry = kernels.setdefault(k.owner, {"kernels": 0, "calls": 0, "total_us": 0.0})
        entry["kernels"] += 1
        entry["calls"] += k.calls
        entry["total_us"] = round(entry["total_us"] + k.total_us, 3)
    passed = sum(t.passed for t in verdict.trials)
    evidence: dict[str, Any] = {
        "status": verdict.status,
        "evaluator_failed": verdict.infra_error is not None,
        "correctness_trials": f"{passed}/{len(verdict.trials)} passed" if verdict.trials else "not run",
        "speedup_vs_eager": verdict.speedup_eager,
        "speedup_vs_torch_compile": verdict.speedup_compile,
        "median_ms": {
            "candidate": _median(verdict.timings.candidate) if verdict.timings else None,
            "eager": _median(verdict.timings.eager) if verdict.timings else None,
            "torch_compile": _median(verdict.timings.compile) if verdict.timings else None,
        },
        "own_kernel_share_of_gpu_time": verdict.own_kernel_time_share,
        "gpu_kernels_by_owner": kernels,
        "aten_ops_recorded": dict(sorted(verdict.aten_ops.items())),
        "aten_ops_outside_allowlist": forbidden_ops(verdict.aten_ops, []),
        "findings": [
            {"rule": f.rule, "severity": f.severity, "source": f.source, "line": f.line} for f in verdict.findings
        ],
        "hack_rules": verdict.hack_rules,
        "task_flags": verdict.task_flags,
        "builds": [{"ok": b.ok, "cached": b.cached, "seconds": round(b.seconds, 2)} for b in verdict.builds],
    }
    return evidence


def untrusted_excerpts(verdict: Verdict) -> str:
    """The Verdict's text: error digests, finding messages and evidence, kernel names (they quote the candidate)."""
    lines = [f"error: {e}" for e in verdict.errors]
    if verdict.compile_log:
        lines.append(f"compile log:\n{verdict.compile_log}")
    for f in verdict.findings:
        where = f" (line {f.line})" if f.line else ""
        lines.append(f"finding {f.rule}{where}: {f.message}" + (f" | evidence: {f.evidence}" if f.evidence else ""))
    for k in verdict.kernels[:20]:
        lines.append(f"kernel [{k.owner}] {k.name}: {k.calls} call(s), {k.total_us:.1f} us")
    return "\n".join(lines)


def _nonce(blocks: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for label, text in blocks:
        h.update(f"{label}\0{len(text)}\0".encode())
        h.update(text.encode())
    return h.hexdigest()[:20]


def data_blocks(request: JudgeRequest, max_chars: int) -> tuple[str, str, list[str]]:
    """The untrusted blocks as one text, their nonce, and notes on truncation."""
    raw: list[tuple[str, str]] = [("REFERENCE", request.reference)]
    if request.previous is not None:
        raw.append(("PREVIOUS", request.previous))
    if request.feedback is not None:
        raw.append(("FEEDBACK", request.feedback))
    raw.append(("CANDIDATE", request.candidate))
    if request.verdict is not None:
        excerpts = untrusted_excerpts(request.verdict)
        if excerpts:
            raw.append(("SANDBOX_TEXT", excerpts))
    notes: list[str] = []
    blocks: list[tuple[str, str]] = []
    for label, text in raw:
        text, cut = bounded(text, max_chars)
        if cut:
            notes.append(f"{label.lower()} truncated to {max_chars} characters for the judge")
        blocks.append((label, text))
    nonce = _nonce(blocks)
    rendered = "\n\n".join(
        f"<<<BEGIN UNTRUSTED {label} {nonce}>>>\n{text.rstrip()}\n<<<END UNTRUSTED {label} {nonce}>>>"
        for label, text in blocks
    )
    return rendered, nonce, notes


def _contract_text(request: JudgeRequest) -> str:
    c = request.contract
    parts = [f"defines class {c.defines}"]
    parts.append("compiles its own kernels" if c.requires_kernel else "own kernels optional")
    parts.append(
        "a complete program written from the reference"
        if c.from_scratch
        else "a revision of the PREVIOUS program that acts on every item of the FEEDBACK and keeps what already worked"
    )
    parts.append(f"backend {request.backend}")
    return "; ".join(parts)


def user_message(request: JudgeRequest, template: PromptTemplate, max_chars: int) -> tuple[str, list[str]]:
    blocks, nonce, notes = data_blocks(request, max_chars)
    if request.verdict is None:
        evidence = (
            "No Verdict: the candidate was not run. Judge from the code alone; correctness, speed and "
            "PyTorch fallbacks are unverified."
        )
    else:
        evidence = json.dumps(trusted_evidence(request.verdict), indent=1)
    text = (
        string.Template(template.user)
        .substitute(
            nonce=nonce,
            skill=request.skill,
            skill_description=request.skill_description or "(no description)",
            contract=_contract_text(request),
            instructions=request.instructions.strip() or "(not given)",
            blocks=blocks,
            evidence=evidence,
        )
        .strip()
    )
    return text, notes


def build_messages(
    request: JudgeRequest, rubric: Rubric, template: PromptTemplate, *, max_block_chars: int = 40_000
) -> tuple[list[Message], list[str]]:
    """Chat messages for one request, and notes (truncation) for the Judgment."""
    rubric.check_skill(request.skill)
    user, notes = user_message(request, template, max_block_chars)
    return [{"role": "system", "content": system_message(rubric, template)}, {"role": "user", "content": user}], notes


def repair_message(reason: str, rubric: Rubric, template: PromptTemplate) -> Message:
    content = string.Template(template.repair).substitute(
        reason=reason, answer_format=render_answer_format(rubric, template)
    )
    return {"role": "user", "content": content.strip()}


def prompt_sha256(messages: list[Message]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
