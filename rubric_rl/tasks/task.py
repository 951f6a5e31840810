"""The task: a reference PyTorch program the coder must make faster.

A reference program is KernelBench's format: Python source defining ``class Model(nn.Module)``,
``get_inputs()`` and ``get_init_inputs()``. The task record carries it as text, so it crosses process and
network boundaries unchanged; nothing here imports or runs it.
"""

from __future__ import annotations

import ast
import hashlib

from pydantic import BaseModel, Field

from rubric_rl.syntax import parse_python

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")


class TaskError(ValueError):
    """A task source is unusable; the message names the file (and row or line) at fault."""


class Task(BaseModel):
    """One reference program and where it came from."""

    id: str = Field(description="Unique within a source: 'L{level}-{problem_id}' for KernelBench tasks.")
    level: int | None = Field(default=None, description="KernelBench level (1-4); None for tasks of no level.")
    problem_id: int = Field(description="Number of the problem within its level.")
    name: str = Field(description="Problem name, e.g. '1_Square_matrix_multiplication_'.")
    origin: str = Field(description="Where the task was read from: a path, 'hf:<dataset>', or 'synthetic:<run>'.")
    code: str = Field(description="The reference program's source text.")

    @property
    def code_sha256(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()


def task_id(level: int | None, problem_id: int) -> str:
    return f"L{level}-{problem_id}" if level is not None else f"T-{problem_id}"


def check_reference_source(code: str, where: str) -> None:
    """Raise TaskError unless ``code`` parses and defines ``Model``, ``get_inputs`` and ``get_init_inputs``."""
    try:
        tree = parse_python(code)
    except SyntaxError as e:
        raise TaskError(f"{where}: reference program does not parse: {e.msg} (line {e.lineno})") from e
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "Model" not in classes:
        raise TaskError(f"{where}: reference program defines no top-level class 'Model'")
    missing = [f for f in REQUIRED_FUNCTIONS if f not in functions]
    if missing:
        raise TaskError(f"{where}: reference program defines no top-level {', '.join(missing)}()")


def make_task(*, level: int | None, problem_id: int, name: str, code: str, origin: str, where: str) -> Task:
    """Build a validated Task; ``where`` names the file/row for error messages."""
    check_reference_source(code, where)
    return Task(id=task_id(level, problem_id), level=level, problem_id=problem_id, name=name, origin=origin, code=code)
