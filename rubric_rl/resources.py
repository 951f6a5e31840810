"""Where the content folders (judges/, skills/, rollouts/, recipes/, examples/) are.

In a source checkout (editable install) they sit at the repository's top level; an installed wheel carries
them under ``rubric_rl/_content``. Users may also point at their own folders by path: every loader takes a
path, and these helpers only resolve the bundled defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

ContentFolder = Literal["judges", "skills", "rollouts", "recipes", "examples"]

_PACKAGE_DIR = Path(__file__).resolve().parent


def content_dir(folder: ContentFolder) -> Path:
    """The bundled content folder, from the wheel if installed, else from the source checkout."""
    for candidate in (_PACKAGE_DIR / "_content" / folder, _PACKAGE_DIR.parent / folder):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"bundled content folder {folder!r} not found (looked in {_PACKAGE_DIR / '_content'} and {_PACKAGE_DIR.parent})"
    )


def resolve_content(path: str | Path, folder: ContentFolder) -> Path:
    """A user path if it exists; otherwise a file of that name in the bundled folder.

    ``judges/stitchcuda.yaml``, ``stitchcuda.yaml`` and ``stitchcuda`` all name the bundled rubric when no such
    file exists in the working directory.
    """
    p = Path(path)
    if p.exists():
        return p
    base = content_dir(folder)
    name = p.name if p.parent.name == folder or p.parent == Path(".") else str(p)
    for candidate in (base / name, base / f"{name}.yaml", base / f"{name}.md"):
        if candidate.exists():
            return candidate
    available = sorted(x.name for x in base.iterdir() if not x.name.startswith("."))
    raise FileNotFoundError(f"{path}: no such file, and no bundled {folder} entry of that name (bundled: {available})")
