"""Task sources: a KernelBench checkout, a JSONL file, or a Hugging Face dataset.

``load_tasks(spec)`` picks the loader from the spec string:

- ``path/to/KernelBench`` (a directory): ``<root>/KernelBench/level{N}/{id}_{Name}.py`` (``root`` may also be
  the inner ``KernelBench`` folder itself);
- ``path/to/problems.jsonl``: rows with ``level, problem_id, name, code``;
- ``hf:<dataset>[@<revision>]``: ``datasets.load_dataset(<dataset>)``, whose splits are ``level_1`` ... ``level_4``
  (ScalingIntelligence/KernelBench's layout); ``<dataset>`` may be a local dataset folder too.

Every loader validates each program and rejects duplicate ids, naming the file at fault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from rubric_rl.tasks.task import Task, TaskError, make_task

KERNELBENCH_HF_DATASET = "ScalingIntelligence/KernelBench"
_KB_FILE = re.compile(r"^(\d+)_(.+)\.py$")
_KB_LEVEL_DIR = re.compile(r"^level(\d+)$")
_HF_SPLIT = re.compile(r"^level_(\d+)$")


def load_tasks(spec: str | Path) -> list[Task]:
    """Load every task of a source (see the module docstring for the spec forms)."""
    text = str(spec)
    if text.startswith("hf:"):
        return load_hf_dataset(text[3:])
    path = Path(text)
    if not path.exists():
        raise TaskError(f"{path}: task source does not exist")
    if path.is_dir():
        return load_kernelbench_dir(path)
    if path.suffix == ".jsonl":
        return load_jsonl(path)
    raise TaskError(f"{path}: not a task source (expected a KernelBench directory, a .jsonl file or hf:<dataset>)")


def load_kernelbench_dir(root: Path) -> list[Task]:
    """Tasks from a KernelBench checkout: ``<root>/KernelBench/level{N}/{id}_{Name}.py``."""
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    level_dirs = sorted(d for d in base.iterdir() if d.is_dir() and _KB_LEVEL_DIR.match(d.name))
    if not level_dirs:
        raise TaskError(f"{root}: no level<N> folders found (expected {root}/KernelBench/level1/1_Name.py, ...)")
    tasks = []
    for level_dir in level_dirs:
        level = int(_KB_LEVEL_DIR.match(level_dir.name).group(1))  # type: ignore[union-attr]
        for file in sorted(level_dir.glob("*.py")):
            m = _KB_FILE.match(file.name)
            if m is None:
                raise TaskError(f"{file}: file name is not '<id>_<Name>.py'")
            code = file.read_text()
            tasks.append(
                make_task(
                    level=level,
                    problem_id=int(m.group(1)),
                    name=file.stem,
                    code=code,
                    origin=str(file),
                    where=str(file),
                )
            )
    return _unique(tasks, str(root))


def load_jsonl(path: Path) -> list[Task]:
    """Tasks from a JSONL file of ``{"level", "problem_id", "name", "code"}`` rows."""
    tasks = []
    with path.open() as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise TaskError(f"{where}: not valid JSON ({e.msg})") from e
            tasks.append(_task_from_row(row, origin=str(path), where=where))
    if not tasks:
        raise TaskError(f"{path}: no tasks in file")
    return _unique(tasks, str(path))


def load_hf_dataset(name: str) -> list[Task]:
    """Tasks from a Hugging Face dataset (hub name or local dataset folder) with ``level_N`` splits."""
    import datasets  # deferred: heavy

    dataset_name, _, revision = name.partition("@")
    try:
        dsd = datasets.load_dataset(dataset_name, revision=revision or None)
    except Exception as e:  # datasets raises many types (FileNotFoundError, DatasetNotFoundError, ConnectionError)
        raise TaskError(f"hf:{name}: could not load dataset: {type(e).__name__}: {e}") from e
    tasks = []
    for split in sorted(dsd.keys()):
        m = _HF_SPLIT.match(split)
        split_level = int(m.group(1)) if m else None
        for i, row in enumerate(dsd[split]):
            row = dict(row)
            row.setdefault("level", split_level)
            tasks.append(_task_from_row(row, origin=f"hf:{name}", where=f"hf:{name}[{split}][{i}]"))
    if not tasks:
        raise TaskError(f"hf:{name}: dataset has no rows")
    return _unique(tasks, f"hf:{name}")


def _task_from_row(row: object, *, origin: str, where: str) -> Task:
    if not isinstance(row, dict):
        raise TaskError(f"{where}: row is not an object")
    missing = [k for k in ("level", "problem_id", "name", "code") if k not in row]
    if missing:
        raise TaskError(f"{where}: row lacks field(s) {', '.join(missing)}")
    try:
        level = None if row["level"] is None else int(row["level"])
        problem_id = int(row["problem_id"])
    except (TypeError, ValueError) as e:
        raise TaskError(f"{where}: level and problem_id must be integers ({e})") from e
    if not isinstance(row["code"], str) or not isinstance(row["name"], str):
        raise TaskError(f"{where}: name and code must be strings")
    return make_task(level=level, problem_id=problem_id, name=row["name"], code=row["code"], origin=origin, where=where)


def _unique(tasks: Iterable[Task], where: str) -> list[Task]:
    seen: dict[str, Task] = {}
    for t in tasks:
        if t.id in seen:
            raise TaskError(f"{where}: duplicate task id {t.id} ({seen[t.id].name!r} and {t.name!r})")
        seen[t.id] = t
    return list(seen.values())
