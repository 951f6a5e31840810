"""Role prompts as files (``rollouts/prompts/*.md``): ``string.Template`` texts with declared placeholders.

A placeholder a role does not provide fails at load time, naming the file, so a typo in a prompt never reaches a
model as a literal ``$name``.
"""

from __future__ import annotations

import string
from pathlib import Path

PLANNER_FIELDS = frozenset({"reference", "profile", "device", "history", "schema"})


def load_prompt(path: Path, allowed: frozenset[str]) -> str:
    """The text of a prompt file whose placeholders are all in ``allowed``."""
    text = path.read_text()
    unknown = sorted(set(string.Template(text).get_identifiers()) - allowed)
    if unknown:
        raise ValueError(f"{path}: placeholder(s) {unknown} are not among {sorted(allowed)}")
    return text


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with its placeholders filled (every declared one must be given)."""
    return string.Template(text).substitute(values).strip()
