"""verl training recipes: composed with verl's own Hydra config, checked before a GPU hour is spent, launched.

The recipes themselves are content (``recipes/``: YAML extending verl's ``ppo_trainer`` or
``sft_trainer_engine``, a run script and a README each). This package finds one, composes it exactly as
``main_ppo`` will, runs verl's ``validate_config`` and the checks verl leaves to run time or never makes (keys
nothing reads, data columns and prompt lengths, the reward function and judge, GPU arithmetic, memory per GPU),
and builds the launch command. verl and Hydra are imported inside the functions that need them.
"""

from rubric_rl.recipes.compose import Recipe, RecipeError, load_recipe
from rubric_rl.recipes.launch import launch, launch_command, run_dir, write_run_record
from rubric_rl.recipes.preflight import Preflight, preflight
from rubric_rl.recipes.report import Finding, PreflightConfig, Report

__all__ = [
    "Finding",
    "Preflight",
    "PreflightConfig",
    "Recipe",
    "RecipeError",
    "Report",
    "launch",
    "launch_command",
    "load_recipe",
    "preflight",
    "run_dir",
    "write_run_record",
]
