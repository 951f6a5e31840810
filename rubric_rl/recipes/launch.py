"""The exact command that runs a recipe, and the launch itself with the resolved config written beside the run.

PPO recipes run ``python -m verl.trainer.main_ppo --config-path DIR --config-name NAME OVERRIDES`` — locally, or
under ``ray job submit`` on a cluster; SFT recipes run ``torchrun ... -m verl.trainer.sft_trainer``. The recipe
is handed to verl as it is (not the resolved copy), so that verl composes exactly what was checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rubric_rl.recipes.compose import Recipe
from rubric_rl.recipes.tree import dig

RESOLVED_NAME = "resolved_config.yaml"
LAUNCH_NAME = "launch.json"


def launch_command(
    recipe: Recipe, overrides: list[str], cfg: dict[str, Any], ray_address: str | None = None
) -> list[str]:
    """The command line that runs ``recipe`` with ``overrides``. A multi-node SFT run is the same torchrun command
    on every node, meeting at ``$MASTER_ADDR:$MASTER_PORT`` (the literal MASTER_ADDR where it is unset)."""
    hydra_args = ["--config-path", str(recipe.path.parent), "--config-name", recipe.path.stem, *overrides]
    if recipe.entrypoint == "sft":
        nnodes, per_node = int(dig(cfg, "trainer.nnodes", 1)), int(dig(cfg, "trainer.n_gpus_per_node", 1))
        endpoint = f"{os.environ.get('MASTER_ADDR', 'MASTER_ADDR')}:{os.environ.get('MASTER_PORT', '29500')}"
        where = (
            ["--standalone"]
            if nnodes == 1
            else [f"--nnodes={nnodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}"]
        )
        return ["torchrun", *where, f"--nproc-per-node={per_node}", "-m", "verl.trainer.sft_trainer", *hydra_args]
    python = "python3" if ray_address else sys.executable
    command = [python, "-m", "verl.trainer.main_ppo", *hydra_args]
    if ray_address:
        return ["ray", "job", "submit", "--address", ray_address, "--", *command]
    return command


def run_dir(cfg: dict[str, Any]) -> Path:
    """Where the run writes: its checkpoint folder (``trainer.default_local_dir``)."""
    return Path(str(dig(cfg, "trainer.default_local_dir", "runs"))).expanduser()


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def write_run_record(
    directory: Path, resolved_yaml: str, recipe: Recipe, overrides: list[str], command: list[str]
) -> Path:
    """``resolved_config.yaml`` and ``launch.json`` in ``directory``; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RESOLVED_NAME).write_text(resolved_yaml)
    record = {
        "recipe": str(recipe.path),
        "overrides": overrides,
        "command": command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": {p: _version(p) for p in ("rubric-rl", "verl", "torch", "vllm", "transferqueue")},
    }
    (directory / LAUNCH_NAME).write_text(json.dumps(record, indent=2) + "\n")
    return directory


def launch(command: list[str]) -> int:
    """Run the command in the foreground (Ctrl-C reaches it: same process group); its exit code."""
    return subprocess.run(command, check=False).returncode
