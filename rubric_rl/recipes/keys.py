"""Keys a recipe sets that verl would not read.

Hydra rejects a misspelled key on the command line (``Could not override``), but a recipe YAML merged onto
``ppo_trainer`` may add any key it likes: ``data.max_prompt_lenght: 8192`` composes, and verl trains with the
default 512. Every key a recipe file sets must therefore exist in verl's own config, except under the few
mappings that verl passes on as they are (``reward_kwargs``, ``engine_kwargs``, ``override_config``,
``ray_init``, and any mapping verl leaves empty).

verl 0.9.1 also still composes the legacy top-level ``custom_reward_function``, ``reward_model`` and
``sandbox_fusion`` sections, and ``main_ppo`` never reads them: a reward set there is silently not used.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rubric_rl.recipes.report import Finding
from rubric_rl.recipes.tree import dig, has, leaves

OPEN_MAPPINGS = (
    "hydra",
    "defaults",
    "reward.custom_reward_function.reward_kwargs",
    "ray_kwargs.ray_init",
)
LEGACY_SECTIONS = {
    "custom_reward_function": "reward.custom_reward_function",
    "reward_model": "reward.reward_model",
    "sandbox_fusion": "reward.sandbox_fusion",
}


def recipe_keys(path: Path, base_names: set[str], _seen: set[Path] | None = None) -> list[tuple[Path, str]]:
    """Every (file, dotted key) a recipe file sets, following its ``defaults`` into sibling recipe files and into
    every option of the recipe's own config groups (``judge: external`` -> ``judge/*.yaml``, package ``_global_``)."""
    seen = _seen if _seen is not None else set()
    path = path.resolve()
    if path in seen:
        return []
    seen.add(path)
    raw = yaml.safe_load(path.read_text()) or {}
    out: list[tuple[Path, str]] = []
    for entry in raw.get("defaults", []) or []:
        if isinstance(entry, str) and entry != "_self_" and entry not in base_names:
            sibling = path.parent / f"{entry}.yaml"
            if sibling.is_file():
                out += recipe_keys(sibling, base_names, seen)
        elif isinstance(entry, dict):
            for group in entry:  # a config group of the recipe: every option is a possible selection
                for option in sorted((path.parent / str(group)).glob("*.yaml")):
                    out += recipe_keys(option, base_names, seen)
    body = {k: v for k, v in raw.items() if k not in ("defaults", "hydra")}
    out += [(path, key) for key, _ in leaves(body)]
    return out


def _open(base: Mapping[str, Any], key: str) -> bool:
    """Whether ``key`` lies under a mapping verl passes on unchecked."""
    if key.startswith(tuple(p + "." for p in OPEN_MAPPINGS)) or key in OPEN_MAPPINGS:
        return True
    parts = key.split(".")
    for i in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:i])
        if has(base, parent):
            value = dig(base, parent)
            return value is None or (isinstance(value, Mapping) and not value)
    return False


def suggest(base: Mapping[str, Any], key: str) -> str:
    """' (did you mean X?)' from the key's siblings, or from keys of the same name elsewhere; '' if none."""
    parent, _, name = key.rpartition(".")
    siblings = dig(base, parent) if parent else base
    if isinstance(siblings, Mapping):
        close = difflib.get_close_matches(name, [str(s) for s in siblings], n=1, cutoff=0.75)
        if close:
            return f" (did you mean {parent + '.' if parent else ''}{close[0]}?)"
    elsewhere = [k for k, _ in leaves(base) if k.endswith("." + name)]
    if elsewhere:
        return f" (did you mean {' or '.join(sorted(elsewhere)[:3])}?)"
    return ""


def unknown_key_findings(keys: list[tuple[Path, str]], base: Mapping[str, Any], base_name: str) -> list[Finding]:
    """An error for every key set by a recipe file that verl's ``base_name`` config does not have."""
    out: list[Finding] = []
    for file, key in keys:
        if has(base, key) or _open(base, key):
            continue
        out.append(
            Finding(
                level="error",
                check="keys",
                key=key,
                message=f"set in {file.name}, but verl 0.9.1's {base_name} has no such key, so nothing would read "
                f"it{suggest(base, key)}",
            )
        )
    return out


def legacy_key_findings(cfg: Mapping[str, Any]) -> list[Finding]:
    """An error for every non-empty value under a legacy top-level section that ``main_ppo`` never reads."""
    out: list[Finding] = []
    for section, current in LEGACY_SECTIONS.items():
        node = cfg.get(section)
        if not isinstance(node, Mapping):
            continue
        for key, value in leaves(node, section + "."):
            if value is not None and value != {}:
                out.append(
                    Finding(
                        level="error",
                        check="keys",
                        key=key,
                        message=f"legacy key: verl 0.9.1's main_ppo never reads top-level {section}.*; set "
                        f"{current + key[len(section) :]} instead",
                    )
                )
    return out
