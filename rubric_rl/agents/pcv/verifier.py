"""The Verifier: turns a Verdict into the feedback the Coder's refine card reads.

A failed program gets exactly what the refine skill was trained on: ``rubric_rl.skills.feedback.render_feedback``.
A correct one gets that too (its performance and profile sections), followed by optimisation guidance derived
from the Verdict's profile (own-kernel share, the PyTorch kernels and ops still running, launch counts, the
speedup against eager and torch.compile) and grounded in passages retrieved by BM25 from the user's local
documentation folder, each cited by number, file and heading. The guidance is rule-based: no model is asked.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

from pydantic import BaseModel, Field

from rubric_rl.agents.pcv.config import VerifierConfig
from rubric_rl.agents.pcv.records import Citation
from rubric_rl.agents.pcv.retrieval import DocIndex
from rubric_rl.sandbox import Verdict
from rubric_rl.skills.feedback import render_feedback

log = logging.getLogger(__name__)

_GEMM = re.compile(r"gemm|matmul|\bmm\b|linear|addmm|bmm|conv", re.IGNORECASE)
_REDUCE = re.compile(r"reduce|sum|mean|softmax|norm|max|min|argmax", re.IGNORECASE)
_ELEMENTWISE = re.compile(r"elementwise|vectorized|unrolled|relu|add|mul|tanh|sigmoid|gelu", re.IGNORECASE)


class Review(BaseModel):
    kind: str = Field(description="failure | optimisation")
    feedback: str
    citations: list[Citation] = Field(default_factory=list)
    seconds: float = 0.0


def _advice(v: Verdict) -> tuple[list[str], list[str]]:
    """(guidance lines, retrieval query terms) from a correct program's Verdict."""
    lines: list[str] = []
    query: list[str] = []
    kernels = v.kernels
    if kernels:
        total = sum(k.total_us for k in kernels) or 1.0
        others = [k for k in kernels if k.owner != "candidate"]
        other_us = sum(k.total_us for k in others)
        if others:
            names = ", ".join(k.name[:60] for k in sorted(others, key=lambda k: -k.total_us)[:3])
            lines.append(
                f"- {100 * other_us / total:.0f}% of GPU time is still in PyTorch or library kernels ({names}): "
                "move that work into your own kernels or fuse it with its neighbours."
            )
            query += ["kernel fusion", *(k.name for k in others[:3])]
        own = [k for k in kernels if k.owner == "candidate"]
        if own:
            top = max(own, key=lambda k: k.total_us)
            lines.append(
                f"- Your kernel {top.name[:80]} takes {100 * top.total_us / total:.0f}% of GPU time "
                f"({top.calls} call(s), {top.total_us:.1f} us): it is the one to optimise first."
            )
            query.append(top.name)
            if _GEMM.search(top.name):
                query += ["tensor cores", "shared memory tiling", "matrix multiply"]
            elif _REDUCE.search(top.name):
                query += ["warp shuffle", "parallel reduction"]
            elif _ELEMENTWISE.search(top.name):
                query += ["memory coalescing", "vectorized loads", "bandwidth"]
        launches = sum(k.calls for k in kernels)
        if launches >= 8 and total / launches < 20.0:
            lines.append(
                f"- {launches} kernel launches of {total / launches:.1f} us on average: the forward is launch-bound; "
                "fuse kernels, or capture the launches in a CUDA graph."
            )
            query += ["cuda graphs", "launch overhead"]
    if v.aten_ops:
        ops = ", ".join(sorted(v.aten_ops, key=lambda o: -v.aten_ops[o])[:5])
        lines.append(f"- The forward still calls PyTorch ops ({ops}); each is a separate pass over memory.")
        query += ["fusion", "global memory"]
    if v.speedup_compile is not None and v.speedup_compile < 1.0:
        lines.append(
            f"- torch.compile is {1 / v.speedup_compile:.2f}x faster than this program: it fuses elementwise "
            "chains and uses tuned GEMMs; match its fusion first."
        )
        query += ["occupancy", "memory throughput"]
    if not lines:
        lines.append("- No bottleneck stands out in the profile; look at memory traffic and occupancy of the kernels.")
        query += ["memory bandwidth", "occupancy", "coalescing"]
    return lines, query


class Verifier:
    """Reviews each Verdict; holds the documentation index (built once per run)."""

    def __init__(self, config: VerifierConfig) -> None:
        self.config = config
        self.index: DocIndex | None = None
        if config.docs_dir is not None:
            self.index = DocIndex(Path(config.docs_dir), passage_chars=config.passage_chars)

    def review(self, verdict: Verdict) -> Review:
        started = time.perf_counter()
        base = render_feedback(verdict, self.config.feedback)
        if verdict.status != "correct":
            return Review(kind="failure", feedback=base, seconds=time.perf_counter() - started)
        lines, query = _advice(verdict)
        citations = self._cite(" ".join(query))
        section = ["", "## Optimisation guidance", *lines]
        if citations:
            section.append("From the documentation:")
            section += [
                f"[{c.index}] {c.source}{f' § {c.heading}' if c.heading else ''}: {c.excerpt}" for c in citations
            ]
        feedback = _bounded("\n".join([base, *section]), self.config.max_chars)
        shown = [c for c in citations if f"[{c.index}]" in feedback]
        return Review(kind="optimisation", feedback=feedback, citations=shown, seconds=time.perf_counter() - started)

    def _cite(self, query: str) -> list[Citation]:
        if self.index is None or self.config.top_passages == 0:
            return []
        hits = self.index.search(query, self.config.top_passages)
        out = []
        for i, hit in enumerate(hits, start=1):
            text = " ".join(hit.passage.text.split())
            excerpt = text if len(text) <= self.config.excerpt_chars else text[: self.config.excerpt_chars - 1] + "…"
            out.append(
                Citation(
                    index=i, source=hit.passage.source, heading=hit.passage.heading, score=hit.score, excerpt=excerpt
                )
            )
        return out


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = "… (feedback cut to its length limit)"
    head = text[: limit - len(note) - 1]
    return head[: head.rfind("\n")] + "\n" + note if "\n" in head else head + note
