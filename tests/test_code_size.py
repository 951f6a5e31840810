"""Size limits on the package: short modules and functions that read top to bottom (house style, issue 34).

A module over 500 lines or a function (sync or async, methods and nested functions included) over 80 lines,
counted from its `def` line to its last line with decorators left out, fails here. There is no allowlist.
"""

import ast
from pathlib import Path

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

PACKAGE = Path(__file__).resolve().parents[1] / "rubric_rl"
ROOT = PACKAGE.parent


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(ROOT)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{rel}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_the_package_has_modules_to_check():
    assert len(_modules()) > 10


def test_no_module_is_over_500_lines():
    offenders = []
    for path in _modules():
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not offenders, f"modules over {MAX_MODULE_LINES} lines (split them):\n" + "\n".join(offenders)


def test_no_function_is_over_80_lines():
    offenders = [entry for path in _modules() for entry in _long_functions(path)]
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(offenders)
