"""Selecting tasks: by level, by problem-id ranges ("1-10,15"), by name (glob or substring, any case)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from rubric_rl.tasks.task import Task


def parse_id_ranges(spec: str) -> set[int]:
    """'1-5,9,12-13' -> {1,2,3,4,5,9,12,13}. Raises ValueError naming the bad part."""
    ids: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if a > b:
                    raise ValueError
                ids.update(range(a, b + 1))
            else:
                ids.add(int(part))
        except ValueError:
            raise ValueError(f"bad id range {part!r} in {spec!r} (expected e.g. '1-5,9')") from None
    return ids


def _name_matches(name: str, pattern: str) -> bool:
    """Glob if the pattern has glob characters, else a substring; both case-insensitive."""
    name, pattern = name.lower(), pattern.lower()
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatch(name, pattern)
    return pattern in name


def filter_tasks(
    tasks: Sequence[Task],
    *,
    levels: Sequence[int] | None = None,
    ids: str | None = None,
    names: Sequence[str] | None = None,
    task_ids: Sequence[str] | None = None,
) -> list[Task]:
    """Keep tasks matching every given criterion; a criterion left None keeps everything."""
    wanted_ids = parse_id_ranges(ids) if ids else None
    out = []
    for t in tasks:
        if levels and t.level not in levels:
            continue
        if wanted_ids is not None and t.problem_id not in wanted_ids:
            continue
        if names and not any(_name_matches(t.name, pat) for pat in names):
            continue
        if task_ids and t.id not in task_ids:
            continue
        out.append(t)
    return out


def is_evaluation_task(task: Task) -> bool:
    """Whether a task is one of KernelBench's evaluation problems, which training data must not contain.

    The rule is the level: KernelBench's loaders (checkout, problems JSONL, Hugging Face) give every task its
    level (1-4), while synthesised tasks and the bundled examples have none. A task source of one's own that
    sets levels is treated as evaluation data too: the safe side of the line.
    """
    return task.level is not None
