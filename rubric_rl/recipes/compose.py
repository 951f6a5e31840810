"""Finding a recipe and composing it with verl's Hydra config, exactly as ``main_ppo`` / ``sft_trainer`` will.

A recipe is a YAML file whose ``defaults`` start from a verl config (``ppo_trainer`` or ``sft_trainer_engine``),
found through ``hydra.searchpath: [pkg://verl.trainer.config]``. ``RECIPE`` on the command line is a YAML path, a
recipe folder (its ``recipe.yaml``), or a bundled name: ``one-gpu-try``, ``cuda-agent-staged/stage1_warmup``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml

from rubric_rl.resources import content_dir

Entrypoint = Literal["ppo", "sft"]
BASES: dict[str, Entrypoint] = {"ppo_trainer": "ppo", "sft_trainer_engine": "sft"}
DEFAULT_FILE = "recipe.yaml"


class RecipeError(ValueError):
    """The recipe cannot be found or composed; the message names the file or key."""


@dataclass(frozen=True)
class Recipe:
    path: Path
    base: str

    @property
    def entrypoint(self) -> Entrypoint:
        return BASES[self.base]

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"


def _in_folder(folder: Path, spec: str) -> Path:
    if (folder / DEFAULT_FILE).is_file():
        return folder / DEFAULT_FILE
    choices = sorted(f"{folder.name}/{p.stem}" for p in folder.glob("*.yaml") if _is_primary(p))
    raise RecipeError(f"{spec}: the folder has no {DEFAULT_FILE}; name one of its configs: {', '.join(choices)}")


def _is_primary(path: Path) -> bool:
    """A file that can be run on its own: it names verl's config search path (files it includes may not)."""
    raw = yaml.safe_load(path.read_text()) or {}
    return isinstance(raw, dict) and "searchpath" in (raw.get("hydra") or {})


def find_recipe_file(spec: str) -> Path:
    """The YAML file ``spec`` names (see the module docstring)."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path.resolve()
    if path.is_dir():
        return _in_folder(path, spec).resolve()
    bundled = content_dir("recipes")
    for candidate in (bundled / spec, bundled / f"{spec}.yaml"):
        if candidate.is_file():
            return candidate.resolve()
        if candidate.is_dir():
            return _in_folder(candidate, spec).resolve()
    names = sorted(p.name for p in bundled.iterdir() if p.is_dir())
    raise RecipeError(f"{spec}: no such file or folder, and no bundled recipe of that name (bundled: {names})")


def _base_of(path: Path, seen: frozenset[Path] = frozenset()) -> str | None:
    """The verl config at the root of a recipe's ``defaults`` chain."""
    raw = yaml.safe_load(path.read_text()) or {}
    for entry in raw.get("defaults", []) or []:
        if isinstance(entry, str) and entry in BASES:
            return entry
        sibling = path.parent / f"{entry}.yaml" if isinstance(entry, str) else None
        if sibling is not None and sibling.is_file() and sibling not in seen:
            found = _base_of(sibling, seen | {path})
            if found:
                return found
    return None


def load_recipe(spec: str) -> Recipe:
    path = find_recipe_file(spec)
    base = _base_of(path)
    if base is None:
        raise RecipeError(
            f"{path}: its defaults must start from one of {sorted(BASES)} (directly or through a "
            "sibling recipe file), with hydra.searchpath: [pkg://verl.trainer.config]"
        )
    return Recipe(path=path, base=base)


def _compose(config_dir: Path | None, module: str | None, name: str, overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    init = (
        initialize_config_dir(config_dir=str(config_dir), version_base=None)
        if config_dir is not None
        else initialize_config_module(config_module=module or "", version_base=None)
    )
    with init:
        return compose(config_name=name, overrides=overrides)


def compose_recipe(recipe: Recipe, overrides: list[str]) -> Any:
    """The composed ``DictConfig``; RecipeError naming the key when Hydra refuses an override."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        return _compose(recipe.path.parent, None, recipe.path.stem, list(overrides))
    except (HydraException, OmegaConfBaseException) as e:
        text = str(e)
        match = re.search(r"override '([^']+)'", text) or re.search(r"[Kk]ey '([^']+)'", text)
        detail = " ".join(line.strip() for line in text.splitlines() if line.strip())
        raise RecipeError(f"{match.group(1) + ': ' if match else ''}{detail}") from None


@lru_cache(maxsize=4)
def base_config(base: str) -> dict[str, Any]:
    """verl's own config (unresolved, as a plain dict): the set of keys that exist."""
    from omegaconf import OmegaConf

    cfg = _compose(None, "verl.trainer.config", base, [])
    return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]


def resolved(cfg: Any) -> dict[str, Any]:
    """The composed config as a plain dict with every interpolation resolved (``???`` left as it is)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)  # type: ignore[return-value]
