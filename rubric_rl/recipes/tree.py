"""Reading a resolved config as a plain nested dict by dotted keys, the way keys are written on a command line.

The checks read plain dicts (``OmegaConf.to_container(cfg, resolve=True)``), never a ``DictConfig``, so that they
can be tested without Hydra and cannot change the config they look at.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

_MISSING = object()


def dig(tree: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``tree['a']['b']`` for ``'a.b'``; ``default`` where any part is absent."""
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def has(tree: Mapping[str, Any], key: str) -> bool:
    return dig(tree, key, _MISSING) is not _MISSING


def leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every (dotted key, value) whose value is not a mapping; an empty mapping counts as a leaf."""
    for name, value in tree.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            yield from leaves(value, key + ".")
        else:
            yield key, value
