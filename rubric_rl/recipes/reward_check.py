"""The reward a recipe names: the function imports the way verl will import it, its config loads, and the judge it
needs is reachable — or the offline judge was chosen explicitly.

Recipes name the reward function as ``pkg://rubric_rl.reward.verl`` (verl 0.9.1's ``load_module`` imports a
``pkg://`` path as a module), so the same recipe works from a source checkout (with the repository on
``PYTHONPATH`` or installed editable) and from an installed wheel, and the module is imported once, as itself,
rather than executed again from a file under a generated name.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from rubric_rl.recipes.report import Finding
from rubric_rl.recipes.tree import dig

FN = "reward.custom_reward_function"
KW = f"{FN}.reward_kwargs"
JUDGE_MIXES_WITHOUT_JUDGE = {"none"}
REWARD_CONFIG_PLACES = ("rubric_rl.reward.verl", "rubric_rl.reward.config", "rubric_rl.reward")


def _err(key: str | None, message: str, check: str = "reward") -> Finding:
    return Finding(level="error", check=check, key=key, message=message)  # type: ignore[arg-type]


def load_reward_function(path: str, name: str) -> tuple[Callable[..., Any] | None, Any, list[Finding]]:
    """(the function, its module, findings), loading it exactly as verl's reward loop does."""
    from verl.utils.import_utils import load_extern_object, load_module

    try:
        module = load_module(path)
    except (FileNotFoundError, ImportError, RuntimeError) as e:
        cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
        return None, None, [_err(f"{FN}.path", f"cannot import {path}: {type(e).__name__}: {e}{cause}")]
    try:
        fn = load_extern_object(path, name)
    except AttributeError:
        return None, module, [_err(f"{FN}.name", f"{path} has no function {name!r}")]
    return fn, module, []


def _reward_config_loader(module: Any) -> Callable[[dict[str, Any]], Any] | None:
    """The reward adapter's own loader of ``reward_kwargs``: ``RewardConfig.from_reward_kwargs`` or
    ``RewardConfig.model_validate``, found in the adapter or in ``rubric_rl.reward``."""
    places = [module] + [_import_or_none(p) for p in REWARD_CONFIG_PLACES]
    for place in places:
        cls = getattr(place, "RewardConfig", None) if place is not None else None
        if cls is not None:
            return getattr(cls, "from_reward_kwargs", None) or cls.model_validate
    return None


def _import_or_none(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _validation_findings(e: ValidationError, prefix: str) -> list[Finding]:
    return [_err(".".join([prefix, *(str(p) for p in err["loc"])]), err["msg"]) for err in e.errors()]


def check_reward(cfg: Mapping[str, Any], composed: Any) -> tuple[list[Finding], bool]:
    """Findings about the reward function and its ``reward_kwargs``; and whether the adapter's own
    ``check_verl_config`` ran (then it owns the legacy-key check)."""
    path, name = dig(cfg, f"{FN}.path"), dig(cfg, f"{FN}.name") or "compute_score"
    if not path:
        return [_err(f"{FN}.path", "not set: verl would score with its built-in rules, which know no CUDA task")], False
    fn, module, out = load_reward_function(str(path), str(name))
    if fn is None:
        return out, False
    if not callable(fn):
        return [_err(f"{FN}.name", f"{path}:{name} is not a function")], False
    is_async = inspect.iscoroutinefunction(fn)
    manager = dig(cfg, "reward.reward_manager.name")
    if is_async and manager == "remote":
        out.append(_err("reward.reward_manager.name", "the 'remote' manager rejects async reward functions"))
    out.append(
        Finding(
            level="info",
            check="reward",
            key=None,
            message=(f"{path}:{name} imports ({'async' if is_async else 'sync'}), manager {manager}"),
        )
    )
    adapter_checked = False
    check = getattr(module, "check_verl_config", None)
    if callable(check):
        adapter_checked = True
        try:
            check(composed)
        except ValueError as e:
            out.append(_err(None, f"the reward adapter's check_verl_config: {e}", check="keys"))
    kwargs = dict(dig(cfg, KW, {}) or {})
    loader = _reward_config_loader(module)
    if loader is None:
        out.append(
            Finding(
                level="warning",
                check="reward",
                key=KW,
                message=("not validated: no RewardConfig found in the reward adapter or rubric_rl.reward"),
            )
        )
    else:
        try:
            loader(kwargs)
        except ValidationError as e:
            out += _validation_findings(e, KW)
        except ValueError as e:
            out.append(_err(KW, str(e)))
    return out, adapter_checked


def check_judge(cfg: Mapping[str, Any], timeout_s: float, environ: Mapping[str, str] | None = None) -> list[Finding]:
    """The judge the reward mix needs: hosted by verl, an endpoint that answers, or offline by explicit choice."""
    from rubric_rl.judge.config import JudgeConfig
    from rubric_rl.serve.endpoint import EndpointError, list_models

    kwargs = dict(dig(cfg, KW, {}) or {})
    mix = (kwargs.get("mix") or {}).get("name") if isinstance(kwargs.get("mix"), Mapping) else kwargs.get("mix")
    if mix in JUDGE_MIXES_WITHOUT_JUDGE:
        return [Finding(level="info", check="judge", key=None, message=f"no judge needed (mix: {mix})")]
    if dig(cfg, "reward.reward_model.enable"):
        model = dig(cfg, "reward.reward_model.model_path")
        return [
            Finding(
                level="info",
                check="judge",
                key=None,
                message=(f"judge {model} hosted by verl; the reward function reaches it through reward_router_address"),
            )
        ]
    try:
        judge = JudgeConfig.model_validate(kwargs.get("judge") or {})
        resolved = judge.resolved(os.environ if environ is None else environ)
    except ValidationError as e:
        return [f.model_copy(update={"check": "judge"}) for f in _validation_findings(e, f"{KW}.judge")]
    except ValueError as e:
        field, _, msg = str(e).partition(": ")
        return [_err(f"{KW}.judge.{field}", msg or str(e), check="judge")]
    if resolved.kind == "heuristic":
        if judge.offline:
            return [
                Finding(
                    level="info",
                    check="judge",
                    key=None,
                    message=("the offline heuristic judge, chosen explicitly (judge.offline: true)"),
                )
            ]
        return [
            _err(
                f"{KW}.judge.base_url",
                (
                    f"mix {mix or '(default)'} needs a judge: set judge.base_url and judge.model (e.g. the URL "
                    "`rubric-rl serve judge` prints), or choose the heuristic with judge.offline=true"
                ),
                check="judge",
            )
        ]
    assert resolved.base_url is not None
    try:
        models = list_models(resolved.base_url, timeout_s, resolved.api_key(environ))
    except EndpointError as e:
        return [_err(f"{KW}.judge.base_url", f"the judge is not reachable: {e}", check="judge")]
    if resolved.model not in models:
        return [_err(f"{KW}.judge.model", f"{resolved.base_url} serves {models}, not {resolved.model!r}", "judge")]
    return [
        Finding(
            level="info",
            check="judge",
            key=None,
            message=(
                f"judge {resolved.model} answers at {resolved.base_url}; the reward workers must reach the same URL"
            ),
        )
    ]
