"""Parsing Python source, safely from many threads at once.

CPython 3.11's ``ast.parse`` keeps the recursion-depth bookkeeping of its AST-to-object conversion per
interpreter, not per thread: when a thread switch lands inside one parse (a garbage collection that runs a
finaliser is enough) and another thread parses meanwhile, the first raises ``SystemError: AST constructor
recursion depth mismatch``. The local executor's slots parse candidates concurrently, and one such error
failed an evaluation. Every parse in rubric_rl goes through ``parse_python``, one at a time (a parse takes
milliseconds; evaluations take seconds).
"""

from __future__ import annotations

import ast
import threading
from typing import Literal, overload

_LOCK = threading.Lock()


@overload
def parse_python(source: str, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...
@overload
def parse_python(source: str, filename: str = ..., *, mode: Literal["eval"]) -> ast.Expression: ...


def parse_python(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, serialised process-wide. Raises ``SyntaxError`` as it does."""
    with _LOCK:
        return ast.parse(source, filename, mode)
