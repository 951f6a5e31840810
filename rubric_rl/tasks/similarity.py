"""How alike two programs are: normalised code and operator sequences.

Used to keep KernelBench's evaluation problems out of synthesised training tasks (decontamination) and to
spot a candidate that copies its reference. Two measures, each in [0, 1]:

- **code**: Jaccard similarity of the sets of token n-grams of the programs after normalisation: comments
  and docstrings gone, formatting canonical (``ast.unparse``), and every name the program binds (variables,
  arguments, functions, classes, ``self.`` attributes) replaced by one placeholder. N-grams never straddle two
  statements (a statement shorter than n is one n-gram), so renaming and reordering lines change nothing.
- **ops**: ``difflib`` ratio of the operator sequences of the ``Model.forward`` (modules expanded, shape
  ops left out; ``rubric_rl.judge.features.reference_ops``), names canonical (``F.relu``, ``torch.relu``,
  ``nn.ReLU`` and ``x.relu()`` are all ``relu``).
"""

from __future__ import annotations

import ast
import difflib
import io
import keyword
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from rubric_rl.judge.features import reference_ops
from rubric_rl.syntax import parse_python

PLACEHOLDER = "ID"
NUMBER = "NUM"
_NORM_DIM = re.compile(r"^((?:batch|instance)norm)[123]d$")


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the program itself binds (not its imports): these are what renaming may change."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    names.discard("self")
    return names - {"__init__", "forward"}


def normalized_lines(source: str, numbers: bool = True) -> list[list[str]]:
    """The program's statements as token lists after normalisation (see the module docstring); [] when it does
    not parse. ``numbers=False`` replaces numeric literals by one placeholder too."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return []
    _strip_docstrings(tree)
    bound = _bound_names(tree)
    raw: list[list[tokenize.TokenInfo]] = [[]]
    for tok in tokenize.generate_tokens(io.StringIO(ast.unparse(tree)).readline):
        if tok.type == tokenize.NEWLINE:
            raw.append([])
        elif tok.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            raw[-1].append(tok)
    return [_placeholders(line, bound, numbers) for line in raw if line]


def _placeholders(line: list[tokenize.TokenInfo], bound: set[str], numbers: bool) -> list[str]:
    """A statement's tokens with the program's own names replaced; keyword-argument names (``kernel_size=``
    inside a call, not a ``def``'s defaults) and attributes of other objects (``torch.relu``) are the library's
    and stay."""
    out: list[str] = []
    depth = 0
    for k, tok in enumerate(line):
        text = tok.string if numbers or tok.type != tokenize.NUMBER else NUMBER
        depth += text in "([{" and tok.type == tokenize.OP
        depth -= text in ")]}" and tok.type == tokenize.OP
        if tok.type == tokenize.NAME and not keyword.iskeyword(text) and text in bound:
            after_dot = k > 0 and line[k - 1].string == "."
            keyword_arg = depth > 0 and k + 1 < len(line) and line[k + 1].string == "=" and line[0].string != "def"
            if not keyword_arg and (not after_dot or out[-2:-1] in (["self"], [PLACEHOLDER])):
                text = PLACEHOLDER
        out.append(text)
    return out


def shingles(lines: Sequence[Sequence[str]], n: int = 5) -> frozenset[tuple[str, ...]]:
    """Token n-grams within each statement; a statement shorter than n is one n-gram."""
    out: set[tuple[str, ...]] = set()
    for line in lines:
        if len(line) <= n:
            out.add(tuple(line))
        else:
            out.update(tuple(line[i : i + n]) for i in range(len(line) - n + 1))
    return frozenset(out)


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def canonical_op(name: str) -> str:
    n = name.lower().replace("_", "")
    m = _NORM_DIM.match(n)
    return m.group(1) if m else n


def operator_sequence(source: str) -> list[str]:
    """The canonical operator names of ``Model.forward``, in order."""
    return [canonical_op(op) for op in reference_ops(source).ops]


def sequence_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, list(a), list(b), autojunk=False).ratio()


def code_similarity(a: str, b: str, numbers: bool = True) -> float:
    return jaccard(shingles(normalized_lines(a, numbers)), shingles(normalized_lines(b, numbers)))


def _class_source(source: str, name: str) -> str | None:
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return ast.unparse(node)
    return None


def copies_reference(reference: str, candidate: str, threshold: float) -> tuple[bool, float]:
    """Whether the candidate's ``ModelNew`` is (nearly) the reference's ``Model``: (verdict, similarity). Numbers
    do not count here: a copy with other constants is still a copy."""
    ref, cand = _class_source(reference, "Model"), _class_source(candidate, "ModelNew")
    if ref is None or cand is None:
        return False, 0.0
    score = code_similarity(ref, cand, numbers=False)
    return score >= threshold, score


class Nearest(BaseModel):
    """The closest program of an index to a query program."""

    task_id: str | None = Field(description="Closest by the larger of the two similarities.")
    name: str | None = None
    code_similarity: float = Field(description="Code similarity to the closest program by code.")
    code_task_id: str | None = None
    op_similarity: float = Field(description="Operator-sequence similarity to the closest program by ops.")
    op_task_id: str | None = None


@dataclass(frozen=True)
class _Entry:
    task_id: str
    name: str
    shingles: frozenset
    ops: tuple[str, ...]


class SimilarityIndex:
    """Programs (e.g. KernelBench's problems) prepared once, queried for the nearest one."""

    def __init__(self, programs: Sequence[tuple[str, str, str]]) -> None:
        """``programs``: (task_id, name, source) triples."""
        self.entries = [
            _Entry(tid, name, shingles(normalized_lines(src)), tuple(operator_sequence(src)))
            for tid, name, src in programs
        ]

    def __len__(self) -> int:
        return len(self.entries)

    def nearest(self, source: str) -> Nearest:
        q_sh, q_ops = shingles(normalized_lines(source)), operator_sequence(source)
        best_code, best_ops = (0.0, None), (0.0, None)
        best_any: tuple[float, _Entry | None] = (0.0, None)
        for e in self.entries:
            c, o = jaccard(q_sh, e.shingles), sequence_similarity(q_ops, e.ops)
            if c > best_code[0]:
                best_code = (c, e)
            if o > best_ops[0]:
                best_ops = (o, e)
            if max(c, o) > best_any[0]:
                best_any = (max(c, o), e)
        top = best_any[1]
        return Nearest(
            task_id=top.task_id if top else None,
            name=top.name if top else None,
            code_similarity=round(best_code[0], 4),
            code_task_id=best_code[1].task_id if best_code[1] else None,
            op_similarity=round(best_ops[0], 4),
            op_task_id=best_ops[1].task_id if best_ops[1] else None,
        )
