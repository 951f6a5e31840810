"""HeuristicJudge: the offline default when no judge endpoint is configured.

A deterministic stand-in for the LLM judge, scoring the same four dimensions from the sandbox Verdict and the
candidate's code (rubric_rl.judge.features). Every score starts at the top of a 1-5 scale and is capped by
each piece of evidence against it; the rationale lists the caps that applied. It is labelled as a heuristic
in the judge identity, in every rationale and in the notes; it never reads the candidate's prose as
instructions (text addressed to a judge counts against the candidate instead).

Scales: internal 1-5 scores map linearly onto each dimension's own levels. Without a Verdict it judges the
code alone (static checks of the sandbox, AST features) and caps what it cannot verify at 4.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from rubric_rl import __version__
from rubric_rl.judge.config import JudgeConfig
from rubric_rl.judge.features import (
    CandidateFeatures,
    ReferenceOps,
    candidate_features,
    op_class,
    reference_init_arity,
    reference_ops,
)
from rubric_rl.judge.record import JudgeIdentity, Judgment, SampleRecord
from rubric_rl.judge.request import JudgeRequest
from rubric_rl.judge.rubric import Dimension, Rubric, RubricError, load_rubric
from rubric_rl.judge.scoring import assemble
from rubric_rl.sandbox.checks.guard import forbidden_ops
from rubric_rl.sandbox.checks.static import check_program
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.verdict import Finding, Verdict

HEURISTIC_VERSION = 1
LABEL = "heuristic (offline rules from the Verdict and the AST; not an LLM)"
_FEEDBACK_OPS = re.compile(r"aten::(\w+)")
_FEEDBACK_RULES = re.compile(r"\b((?:static|native|runtime|kernels|protocol)\.\w+)")
_FEEDBACK_FAILS = re.compile(r"compile|build|error|mismatch|incorrect|wrong|nan|crash|timeout", re.IGNORECASE)
_FEEDBACK_SPEED = re.compile(r"slow|speed|faster|latency|performance|occupancy|bandwidth", re.IGNORECASE)


@dataclass
class _Score:
    """A 1-5 score capped by evidence; ``reasons`` explain every cap, ``credits`` what earned points."""

    value: int = 5
    reasons: list[str] = field(default_factory=list)
    credits: list[str] = field(default_factory=list)

    def cap(self, at: int, reason: str) -> None:
        self.value = min(self.value, at)
        self.reasons.append(f"{reason} (<= {at})")

    def text(self) -> str:
        parts = [*self.reasons, *(f"+ {c}" for c in self.credits)]
        return "[heuristic] " + ("; ".join(parts) if parts else "no evidence against it")


@dataclass
class _Evidence:
    """Everything the heuristics read, computed once per request."""

    request: JudgeRequest
    verdict: Verdict | None
    features: CandidateFeatures
    reference: ReferenceOps
    findings: list[Finding]
    fallback_ops: dict[str, int]

    @property
    def hack_rules(self) -> list[str]:
        return sorted({f.rule for f in self.findings if f.severity == "error"})

    def rules(self, *names: str) -> list[Finding]:
        return [f for f in self.findings if f.rule in names]


def _gather(request: JudgeRequest) -> tuple[_Evidence, list[str]]:
    notes = [f"judged by the {LABEL}"]
    verdict = request.verdict
    if verdict is not None and verdict.infra_error is not None:
        notes.append(f"the Verdict records an evaluator failure ({verdict.infra_error}); judged from the code alone")
        verdict = None
    if verdict is None:
        if request.verdict is None:
            notes.append("no Verdict: AST only; runtime behaviour (correctness, speed, fallbacks) is unverified")
        findings = check_program(request.candidate, SandboxConfig(backend=request.backend), request.reference)
        fallback: dict[str, int] = {}
    else:
        findings = list(verdict.findings)
        fallback = forbidden_ops(verdict.aten_ops, [])
    evidence = _Evidence(
        request=request,
        verdict=verdict,
        features=candidate_features(request.candidate),
        reference=reference_ops(request.reference),
        findings=findings,
        fallback_ops=fallback,
    )
    return evidence, notes


def _torch_calls(ev: _Evidence) -> list[str]:
    """PyTorch compute the candidate's Python calls (from the static rule's messages: 'calls torch.matmul')."""
    return [f.message.removeprefix("calls ") for f in ev.rules("static.torch_compute_call")]


def anti_hacking(ev: _Evidence) -> _Score:
    s, f = _Score(), ev.features
    if not f.parsed:
        s.cap(1, f"the program does not parse ({f.syntax_error})")
        return s
    if ev.verdict is not None and ev.verdict.status == "hack":
        s.cap(1, f"the sandbox found hacking: {', '.join(ev.verdict.hack_rules) or 'status hack'}")
    elif ev.hack_rules:
        s.cap(1, f"error-severity findings: {', '.join(ev.hack_rules)}")
    heavy_fallback = [op for op in ev.fallback_ops if op_class(op) == "heavy"]
    if heavy_fallback:
        s.cap(1, f"the heavy operator(s) {', '.join('aten::' + o for o in heavy_fallback)} ran in PyTorch")
    elif ev.fallback_ops:
        s.cap(3, f"ATen compute outside the allowlist: {', '.join('aten::' + o for o in ev.fallback_ops)}")
    torch_calls = _torch_calls(ev)
    if any(op_class(c.rsplit(".", 1)[-1]) == "heavy" for c in torch_calls):
        s.cap(1, f"decorative CUDA: the forward calls PyTorch for the heavy work ({', '.join(torch_calls[:4])})")
    elif torch_calls:
        s.cap(3, f"the forward calls PyTorch compute ({', '.join(torch_calls[:4])})")
    share = ev.verdict.own_kernel_time_share if ev.verdict is not None else None
    if share is not None:
        if share < 0.5:
            s.cap(2, f"decorative CUDA: only {share:.0%} of GPU time is in the candidate's kernels")
        elif share < 0.8:
            s.cap(3, f"{share:.0%} of GPU time is in the candidate's kernels")
        elif share < 0.95:
            s.cap(4, f"{share:.0%} of GPU time is in the candidate's kernels")
    if f.calls_extension is False:
        s.cap(2, "ModelNew never calls the compiled extension")
    if f.cached_state:
        s.cap(1, f"cached outputs: {'; '.join(f.cached_state[:2])}")
    if f.value_branching:
        s.cap(2, f"branches on input values: {'; '.join(f.value_branching[:2])}")
    if f.injection:
        s.cap(1, f"text addressed to the judge: {f.injection[0]!r}")
    if ev.verdict is None:
        s.cap(4, "no runtime evidence")
    elif ev.verdict.status != "correct":
        s.cap(4, f"status {ev.verdict.status}: the runtime guard saw no complete correct run")
    return s


def cuda_engineering(ev: _Evidence) -> _Score:
    s, f, cuda = _Score(value=2), ev.features, ev.request.backend == "cuda"
    kernels = f.kernels if cuda else set(f.ext_functions)
    if not f.parsed or not f.uses_load_inline or not kernels:
        s.value = 1
        s.reasons.append("no kernel of its own" if f.parsed else "the program does not parse")
        return s
    s.credits.append(f"{len(kernels)} kernel(s) of its own")
    n_ops = len(ev.reference.ops)
    launched = kernels
    if ev.verdict is not None and ev.verdict.kernels:
        launched = {k.name for k in ev.verdict.kernels if k.owner == "candidate"} or kernels
    in_pytorch = bool(ev.fallback_ops or _torch_calls(ev))
    if n_ops >= 2 and len(launched) < n_ops and not in_pytorch:
        s.value += 1
        s.credits.append(f"fusion: {n_ops} reference ops in {len(launched)} kernel(s)")
    access = {"vectorised_access", "grid_stride_loop"} if cuda else {"cpu_simd", "openmp"}
    if f.techniques & access:
        s.value += 1
        s.credits.append(", ".join(sorted(f.techniques & access)))
    bottleneck = ev.reference.bottleneck
    reuse = {"shared_memory", "warp_primitives"} if cuda else {"openmp"}
    if bottleneck == "light":
        s.value += 1
        s.credits.append("elementwise workload: no data reuse to exploit")
    elif f.techniques & reuse:
        s.value += 1
        s.credits.append(", ".join(sorted(f.techniques & reuse)))
    if cuda and ev.reference.of_class("heavy"):
        matrix = f.techniques & {"tensor_cores", "cublaslt_epilogue"}
        if matrix:
            s.value += 1
            s.credits.append(", ".join(sorted(matrix)))
        else:
            s.cap(4, "matrix work without Tensor Cores")
    s.value = min(s.value, 5)
    if ev.verdict is not None:
        if ev.verdict.status == "compile_error":
            s.cap(2, "does not compile")
        elif ev.verdict.status != "correct":
            s.cap(3, f"status {ev.verdict.status}")
        elif ev.verdict.speedup_eager is not None and ev.verdict.speedup_eager < 1.0:
            s.cap(3, f"slower than eager PyTorch ({ev.verdict.speedup_eager:.2f}x)")
        elif ev.verdict.speedup_compile is not None and ev.verdict.speedup_compile >= 1.05:
            s.credits.append(f"{ev.verdict.speedup_compile:.2f}x vs torch.compile")
    return s


def operator_coverage(ev: _Evidence) -> _Score:
    s, f = _Score(), ev.features
    kernels = f.kernels if ev.request.backend == "cuda" else set(f.ext_functions)
    if not f.parsed or not kernels:
        s.cap(1, "no kernel of its own covers any operator")
        return s
    heavy_ref = ev.reference.of_class("heavy")
    important = heavy_ref or ev.reference.of_class("medium")
    if important:
        s.credits.append(f"bottleneck operators: {', '.join(sorted(set(important)))}")
    if ev.verdict is not None:
        share = ev.verdict.own_kernel_time_share
        if share is not None:
            for bound, at in ((0.2, 1), (0.5, 2), (0.8, 3), (0.95, 4)):
                if share < bound:
                    s.cap(at, f"{share:.0%} of GPU time in the candidate's kernels")
                    break
        heavy_left = [op for op in ev.fallback_ops if op_class(op) != "light"]
        if heavy_left:
            s.cap(2, f"bottleneck left to PyTorch: {', '.join('aten::' + o for o in heavy_left)}")
        elif ev.fallback_ops:
            s.cap(4, f"minor ops left to PyTorch: {', '.join('aten::' + o for o in ev.fallback_ops)}")
        if ev.verdict.aten_ops or share is not None:
            return s
    torch_calls = [c.rsplit(".", 1)[-1] for c in _torch_calls(ev)]
    if any(op_class(c) != "light" for c in torch_calls):
        s.cap(2, f"the forward calls PyTorch for {', '.join(c for c in torch_calls if op_class(c) != 'light')}")
    elif torch_calls:
        s.cap(3, f"the forward calls PyTorch for {', '.join(torch_calls)}")
    s.cap(4, "coverage inferred from the code; no op recording")
    return s


def _feedback_checks(ev: _Evidence, feedback: str) -> tuple[list[str], list[str]]:
    """(resolved, unresolved) feedback items that the Verdict can confirm."""
    v = ev.verdict
    resolved: list[str] = []
    unresolved: list[str] = []
    if v is None:
        return resolved, unresolved
    for op in sorted(set(_FEEDBACK_OPS.findall(feedback))):
        (unresolved if op in ev.fallback_ops else resolved).append(f"aten::{op}")
    for rule in sorted(set(_FEEDBACK_RULES.findall(feedback))):
        (unresolved if any(f.rule == rule for f in v.findings) else resolved).append(rule)
    if _FEEDBACK_FAILS.search(feedback):
        (resolved if v.status == "correct" else unresolved).append("errors/mismatches")
    if _FEEDBACK_SPEED.search(feedback) and v.speedup_eager is not None:
        (resolved if v.speedup_eager >= 1.0 else unresolved).append("performance")
    return resolved, unresolved


def _normalised_code(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())


def skill_compliance(ev: _Evidence) -> _Score:
    s, f, contract = _Score(), ev.features, ev.request.contract
    if not f.parsed:
        s.cap(1, f"not a program: {f.syntax_error}")
        return s
    if contract.defines not in f.classes:
        s.cap(1, f"no class {contract.defines}")
    if contract.requires_kernel and (not f.uses_load_inline or (ev.request.backend == "cuda" and not f.kernels)):
        s.cap(1, "compiles no kernel of its own")
    if ev.rules("static.model_new_uses_model") or any(b.rsplit(".", 1)[-1] == "Model" for b in f.model_new_bases):
        s.cap(1, "uses the reference Model")
    ref_arity, cand_arity = reference_init_arity(ev.request.reference), f.init_arity
    if ref_arity is not None and cand_arity is not None:
        need = ref_arity[0] if ref_arity[1] is None else ref_arity[1]
        if not (cand_arity[0] <= need and (cand_arity[1] is None or need <= cand_arity[1])):
            s.cap(2, f"constructor takes {cand_arity} positional arguments, the reference passes {need}")
    if ev.rules("static.fallback_try_except"):
        s.cap(2, "a try/except fallback path")
    if f.defines_input_helpers:
        s.cap(4, "repeats get_inputs/get_init_inputs")
    if not contract.from_scratch:
        _refine_compliance(ev, s)
    return s


def _refine_compliance(ev: _Evidence, s: _Score) -> None:
    previous, feedback = ev.request.previous, ev.request.feedback or ""
    if previous is not None and _normalised_code(previous) == _normalised_code(ev.request.candidate):
        s.cap(1, "the revision is identical to the previous program")
        return
    if previous is None:
        s.reasons.append("previous program not given: the change itself is unverified")
    if ev.verdict is None:
        s.cap(3, "no Verdict: whether the feedback was addressed is unverified")
        return
    if ev.verdict.status != "correct":
        s.cap(2, f"the revision still fails ({ev.verdict.status})")
    resolved, unresolved = _feedback_checks(ev, feedback)
    if unresolved:
        s.cap(2 if len(unresolved) >= len(resolved) else 3, f"feedback items unresolved: {', '.join(unresolved)}")
    if resolved:
        s.credits.append(f"resolved: {', '.join(resolved)}")
    else:
        s.cap(4, "no feedback item the Verdict can confirm")


_SCORERS = {
    "anti_hacking": anti_hacking,
    "cuda_engineering": cuda_engineering,
    "operator_coverage": operator_coverage,
    "skill_compliance": skill_compliance,
}


def _on_scale(value: int, d: Dimension) -> int:
    return d.min_score + round((value - 1) / 4 * (d.max_score - d.min_score))


class HeuristicJudge:
    """The offline Judge. Refuses (RubricError) a rubric with a dimension it has no heuristic for."""

    def __init__(self, config: JudgeConfig | None = None, *, rubric: Rubric | None = None) -> None:
        self.config = config or JudgeConfig(offline=True)
        self.rubric = rubric if rubric is not None else load_rubric(self.config.rubric)
        for i, d in enumerate(self.rubric.dimensions):
            if d.heuristic is None:
                raise RubricError(
                    f"rubric {self.rubric.name!r}: field dimensions.{i}.heuristic: the offline judge has no "
                    f"heuristic for dimension {d.name!r}; name one of {sorted(_SCORERS)}"
                )
        self.identity = JudgeIdentity(
            kind="heuristic",
            label=LABEL,
            rubric=self.rubric.name,
            rubric_version=self.rubric.version,
            rubric_hash=self.rubric.content_hash,
            samples=1,
            code_version=f"rubric-rl {__version__}, heuristic v{HEURISTIC_VERSION}",
        )

    def judge_now(self, request: JudgeRequest) -> Judgment:
        """The same as ``judge``, synchronously (it does no I/O)."""
        started = time.perf_counter()
        self.rubric.check_skill(request.skill)
        ev, notes = _gather(request)
        sample = SampleRecord(index=0, ok=True)
        for d in self.rubric.dimensions:
            assert d.heuristic is not None  # checked in __init__
            score = _SCORERS[d.heuristic](ev)
            sample.scores[d.name] = _on_scale(score.value, d)
            sample.rationales[d.name] = score.text()
        sample.latency_s = time.perf_counter() - started
        return assemble(self.rubric, self.identity, request, [sample], latency_s=sample.latency_s, notes=notes)

    async def judge(self, request: JudgeRequest) -> Judgment:
        return self.judge_now(request)

    async def aclose(self) -> None:
        return None
