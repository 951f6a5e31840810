"""Extracting the candidate program from a coder's response.

Coders answer in Markdown: reasoning (often in ``<think>`` sections), prose, and one or more fenced code blocks.
The contract of both skills is one Python program that defines ``ModelNew``. ``extract_program`` finds it and,
when it cannot, says precisely why with a stable ``error_code`` (a format failure is a training signal, so it
must be distinguishable from a wrong kernel).
"""

from __future__ import annotations

import ast
import re
from typing import Literal

from pydantic import BaseModel

from rubric_rl.syntax import parse_python

ExtractionErrorCode = Literal[
    "empty_response",  # nothing but whitespace (or only reasoning) in the response
    "unfinished_thinking",  # the response ended inside a <think> section
    "no_code",  # no fenced block, and the text itself is not a Python program
    "no_model_new",  # code was found, but no block defines class ModelNew
    "syntax_error",  # the block that defines ModelNew does not parse
    "unclosed_fence",  # a code block was opened and never closed, and what follows does not parse
]

_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think\s*>", re.IGNORECASE)
# A fence opens at the start of a line with ``` or ~~~ (3+), an optional info string, and closes with the same
# marker at the start of a line.
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.MULTILINE)
_PYTHON_INFOS = {"", "python", "py", "python3", "py3"}


class CodeBlock(BaseModel):
    info: str
    code: str
    closed: bool


class Extraction(BaseModel):
    """The program found in a response, or why none was."""

    program: str | None = None
    error_code: ExtractionErrorCode | None = None
    error: str | None = None
    blocks_found: int = 0
    notes: list[str] = []

    @property
    def ok(self) -> bool:
        return self.program is not None


def strip_thinking(text: str) -> tuple[str, bool]:
    """Remove reasoning: everything up to the last ``</think>``, and any closed ``<think>...</think>``.

    Returns (answer, unfinished): ``unfinished`` is True when a ``<think>`` is never closed.
    """
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        return text[: opened.start()], True
    return text, False


def find_code_blocks(text: str) -> list[CodeBlock]:
    """Fenced code blocks in order; an unclosed last fence runs to the end of the text."""
    blocks: list[CodeBlock] = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if m is None:
            return blocks
        fence = m.group("fence")
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        c = close.search(text, body_start)
        info = m.group("info").strip().split()[0].lower() if m.group("info").strip() else ""
        if c is None:
            blocks.append(CodeBlock(info=info, code=text[body_start:], closed=False))
            return blocks
        blocks.append(CodeBlock(info=info, code=text[body_start : c.start()], closed=True))
        pos = c.end()


def _defines_model_new(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def _parse(code: str) -> tuple[ast.Module | None, SyntaxError | None]:
    try:
        return parse_python(code), None
    except SyntaxError as e:
        return None, e


def extract_program(response: str) -> Extraction:
    """Find the one Python program defining ``ModelNew`` in a coder's response."""
    if not response or not response.strip():
        return Extraction(error_code="empty_response", error="the response is empty")
    answer, unfinished = strip_thinking(response)
    notes: list[str] = []
    if unfinished:
        if not answer.strip():
            return Extraction(
                error_code="unfinished_thinking",
                error="the response ended inside a <think> section, before any answer",
            )
        notes.append("an unclosed <think> section after the answer was ignored")
    if not answer.strip():
        return Extraction(error_code="empty_response", error="the response holds only reasoning, no answer")

    blocks = [b for b in find_code_blocks(answer) if b.info in _PYTHON_INFOS]
    if not blocks:
        tree, err = _parse(answer)
        if tree is not None and _defines_model_new(tree):
            return Extraction(program=answer.strip() + "\n", notes=[*notes, "no code fence: the whole answer is code"])
        return Extraction(
            error_code="no_code",
            error="no ```python code block in the response, and the answer is not itself a Python program",
        )

    candidates: list[tuple[int, CodeBlock, ast.Module]] = []
    broken: list[tuple[int, CodeBlock, SyntaxError]] = []
    for i, block in enumerate(blocks):
        tree, err = _parse(block.code)
        if tree is not None:
            if _defines_model_new(tree):
                candidates.append((i, block, tree))
        elif err is not None and re.search(r"^\s*class\s+ModelNew\b", block.code, re.MULTILINE):
            broken.append((i, block, err))

    if candidates:
        i, block, _ = candidates[-1]
        if len(candidates) > 1:
            notes.append(f"{len(candidates)} blocks define ModelNew; the last one (block {i + 1}) was taken")
        if not block.closed:
            notes.append("the code block was not closed (truncated response?) but parses")
        return Extraction(program=block.code.rstrip() + "\n", blocks_found=len(blocks), notes=notes)

    if broken:
        i, block, err = broken[-1]
        if not block.closed:
            return Extraction(
                error_code="unclosed_fence",
                error=f"block {i + 1} was never closed and does not parse (line {err.lineno}: {err.msg}); "
                "the response was probably truncated",
                blocks_found=len(blocks),
            )
        return Extraction(
            error_code="syntax_error",
            error=f"block {i + 1} defines ModelNew but does not parse: line {err.lineno}: {err.msg}",
            blocks_found=len(blocks),
        )
    return Extraction(
        error_code="no_model_new",
        error=f"{len(blocks)} Python code block(s) found, none defines class ModelNew",
        blocks_found=len(blocks),
    )
