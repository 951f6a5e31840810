"""The gpu tests run only on a GPU machine, so a config key they override that the config no longer has is found
there, one device call later (the sections restructuring left ``ship_outputs_max_mb=`` in one). Here, on any
machine: every ``run(..., key=...)`` and ``.updated(key=...)`` in them names a field of ``SandboxConfig``, and a
section's mapping names fields of that section."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from rubric_rl.sandbox import SandboxConfig

HERE = Path(__file__).resolve().parent
GPU_TEST_FILES = sorted(p for p in HERE.glob("test_*.py") if "pytest.mark.gpu" in p.read_text())


def overrides(path: Path) -> list[tuple[int, str, list[str] | None]]:
    """(line, keyword, the keys of its literal mapping or None) of each config override call in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        helper = isinstance(node.func, ast.Name) and node.func.id == "run"  # run(evaluator, reference, path, **kw)
        if not (helper or (isinstance(node.func, ast.Attribute) and node.func.attr == "updated")):
            continue
        for kw in node.keywords:
            if kw.arg is None:  # **overrides passed along
                continue
            keys = None
            if isinstance(kw.value, ast.Dict) and all(isinstance(k, ast.Constant) for k in kw.value.keys):
                keys = [k.value for k in kw.value.keys]  # type: ignore[union-attr]
            found.append((node.lineno, kw.arg, keys))
    return found


def test_the_gpu_test_files_are_found() -> None:
    assert {p.name for p in GPU_TEST_FILES} >= {"test_gpu.py", "test_lifetime.py"}


@pytest.mark.parametrize("path", GPU_TEST_FILES, ids=lambda p: p.name)
def test_the_gpu_tests_override_fields_the_config_has(path: Path) -> None:
    fields = SandboxConfig.model_fields
    wrong = []
    for line, key, keys in overrides(path):
        if key not in fields:
            wrong.append(f"{path.name}:{line}: {key}= is no SandboxConfig field")
            continue
        section = fields[key].annotation
        if keys is not None and isinstance(section, type) and issubclass(section, BaseModel):
            wrong += [f"{path.name}:{line}: {key}.{k} is no field" for k in keys if k not in section.model_fields]
    assert wrong == []


def test_the_check_finds_a_flat_key(tmp_path: Path) -> None:
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        "run(ev, ref, p, ship_outputs_max_mb=64, timing={'enabled': False, 'trails': 3})\n"
        "subprocess.run(['true'], capture_output=True)\n"
        "cfg.updated(limits={'run_timeout_s': 30})\n"
    )
    assert overrides(bad) == [
        (1, "ship_outputs_max_mb", None),
        (1, "timing", ["enabled", "trails"]),
        (3, "limits", ["run_timeout_s"]),
    ]
