"""verl's own ``validate_config``, run as ``main_ppo`` runs it, and what ``main_ppo`` needs beyond a base install.

Two things a base ``pip install verl==0.9.1`` lacks:

- ``transfer_queue``: ``trainer.use_v1: true`` (the default) runs ``TaskRunnerV1``, which imports it before
  anything else. It is a dependency of ``verl[verl-core]`` and comes with rubric-rl's ``train`` extra
  (``TransferQueue>=0.1.10``). ``trainer.use_v1=false`` runs the legacy ``main_ppo_v0`` trainer, which does not
  import it (verl marks that trainer deprecated).
- an inference engine: ``actor_rollout_ref.rollout.name`` is ``vllm``, ``sglang`` or ``trtllm``; none is pulled
  by verl itself (``verl[vllm]`` pins vllm 0.24.0 and torch 2.11).

On a dry run these are warnings (it is usually made on a laptop); when launching here they are errors.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import re
import shutil
import warnings
from typing import Any

from rubric_rl.recipes.report import Finding
from rubric_rl.recipes.tree import dig

VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # verl's fallback list when vllm is absent
ENGINE_INSTALL = {
    "vllm": "pip install 'verl[vllm]==0.9.1' (vllm 0.24.0, torch 2.11)",
    "sglang": "pip install 'verl[sglang]==0.9.1'",
    "trtllm": "install TensorRT-LLM as its documentation says",
}
_KEY = re.compile(r"'?((?:actor_rollout_ref|critic|data|trainer|algorithm|reward)(?:\.[A-Za-z_]+)+)'?")
_MESSAGE_KEYS = {
    "real_train_batch_size": "data.train_batch_size",
    "critic.ppo_mini_batch_size": "critic.ppo_mini_batch_size",
    "ppo_mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size",
    "ppo_micro_batch_size": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "temperature": "actor_rollout_ref.rollout.temperature",
    "use_remove_padding": "actor_rollout_ref.model.use_remove_padding",
}


def uses(cfg: Any) -> tuple[bool, bool]:
    """(reference policy, critic), decided by verl's own functions."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(need_reference_policy(cfg)), bool(need_critic(cfg))


def key_in(message: str) -> str | None:
    """The config key a verl assertion message is about, where it says."""
    match = _KEY.search(message)
    if match:
        return match.group(1)
    return next((key for word, key in _MESSAGE_KEYS.items() if word in message), None)


def _lora_rank(cfg: Any) -> int:
    rank = int(dig(cfg, "actor_rollout_ref.model.lora.rank", 0) or 0)
    return rank if rank > 0 else int(dig(cfg, "actor_rollout_ref.model.lora_rank", 0) or 0)


def model_config_reachable(path: str) -> bool:
    """Whether a model's config can be read here without a download."""
    from rubric_rl.recipes.model_spec import hf_config

    return hf_config(path) is not None


def run_validate_config(cfg: Any) -> list[Finding]:
    """verl's ``validate_config`` on a copy of the composed config; each failure as an error naming its key.

    With LoRA and vLLM, verl's check imports vLLM to look up the ranks vLLM accepts; where vLLM is absent the
    rank is checked against verl's own fallback list and the rest of ``validate_config`` runs with LoRA off.
    """
    from hydra.errors import HydraException
    from omegaconf import open_dict
    from omegaconf.errors import OmegaConfBaseException
    from verl.utils.config import validate_config

    cfg = copy.deepcopy(cfg)
    out: list[Finding] = []
    rank = _lora_rank(cfg)
    if rank > 0 and dig(cfg, "actor_rollout_ref.rollout.name") == "vllm" and importlib.util.find_spec("vllm") is None:
        if rank > VLLM_MAX_LORA_RANKS[-1]:
            out.append(
                Finding(
                    level="error",
                    check="verl",
                    key="actor_rollout_ref.model.lora_rank",
                    message=f"{rank} is above vLLM's largest LoRA rank {VLLM_MAX_LORA_RANKS[-1]}",
                )
            )
        with open_dict(cfg):
            cfg.actor_rollout_ref.model.lora_rank = 0
            cfg.actor_rollout_ref.model.lora.rank = 0
    use_ref, use_critic = uses(cfg)
    critic_model = str(dig(cfg, "critic.model.path"))
    if use_critic and not model_config_reachable(critic_model):
        use_critic = False  # verl builds the critic's HFModelConfig, which reads the model's config.json
        out.append(
            Finding(
                level="warning",
                check="verl",
                key="critic.model.path",
                message=(
                    f"{critic_model} is not reachable here (no config.json, not in the local Hugging Face cache): "
                    "verl's "
                    "validate_config reads it to check the critic, so the critic part was not validated"
                ),
            )
        )
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            validate_config(config=cfg, use_reference_policy=use_ref, use_critic=use_critic)
    except (
        AssertionError,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        OmegaConfBaseException,
        HydraException,
    ) as e:
        message = str(e).strip() or type(e).__name__
        out.append(Finding(level="error", check="verl", key=key_in(message), message=f"validate_config: {message}"))
    return out


def install_findings(cfg: dict[str, Any], entrypoint: str, launching: bool) -> list[Finding]:
    """What the launch needs on the machine that launches."""
    level = "error" if launching else "warning"
    where = "here" if launching else "on this machine (needed where the run launches)"
    out: list[Finding] = []

    def missing(key: str, what: str, how: str) -> None:
        out.append(Finding(level=level, check="install", key=key, message=f"{what} is not installed {where}: {how}"))

    if entrypoint == "sft":
        if shutil.which("torchrun") is None:
            missing("trainer.n_gpus_per_node", "torchrun", "it comes with torch")
        return out
    if dig(cfg, "trainer.use_v1", True) and importlib.util.find_spec("transfer_queue") is None:
        missing(
            "trainer.use_v1",
            "transfer_queue (imported by the v1 trainer)",
            "pip install 'rubric-rl[train]' (TransferQueue>=0.1.10), or set trainer.use_v1=false",
        )
    engine = str(dig(cfg, "actor_rollout_ref.rollout.name"))
    if engine in ENGINE_INSTALL and importlib.util.find_spec(engine) is None:
        missing("actor_rollout_ref.rollout.name", f"the rollout engine {engine}", ENGINE_INSTALL[engine])
    if launching:
        out += _visible_gpu_findings(cfg)
    return out


def _visible_gpu_findings(cfg: dict[str, Any]) -> list[Finding]:
    import torch

    want = int(dig(cfg, "trainer.n_gpus_per_node", 1))
    have = torch.cuda.device_count()
    if int(dig(cfg, "trainer.nnodes", 1)) == 1 and have < want:
        return [
            Finding(
                level="error",
                check="install",
                key="trainer.n_gpus_per_node",
                message=f"{want} GPUs per node asked, {have} visible here",
            )
        ]
    return []
