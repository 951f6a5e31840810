"""Parsing from many threads at once: CPython 3.11's ast.parse is not safe for it, ours must be."""

import gc
import sys
import threading
from pathlib import Path

from rubric_rl.syntax import parse_python

SOURCE = "\n".join(
    f"def f{i}(x):\n    return [(a, b) for a in range(x) for b in range(a) if a % 2]" for i in range(300)
)


class _Finalised:
    def __del__(self) -> None:  # a finaliser run by a collection inside a parse switches threads there
        sum(range(50))


def test_parsing_from_many_threads_at_once_never_fails():
    # Unserialised, this raised "SystemError: AST constructor recursion depth mismatch" on CPython 3.11.7
    # (4 of 320 parses here), as it did in the local executor's slots.
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(40):
            for _ in range(200):
                cycle = _Finalised()
                cycle.self = cycle  # type: ignore[attr-defined]
            try:
                parse_python(SOURCE)
            except BaseException as e:  # any failure of a parse is what this test counts
                errors.append(e)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.collect()
    assert errors == []


def test_rubric_rl_parses_only_through_parse_python():
    package = Path(__file__).resolve().parents[1] / "rubric_rl"
    callers = [p for p in package.rglob("*.py") if "ast.parse(" in p.read_text() and p.name != "syntax.py"]
    assert callers == []
