"""Serving a coder or a judge behind an OpenAI-compatible endpoint (``vllm serve``), for recipes and rollouts."""

from rubric_rl.serve.endpoint import EndpointError, list_models
from rubric_rl.serve.server import ServeConfig, ServedModel, build_command, vllm_launcher

__all__ = ["EndpointError", "ServeConfig", "ServedModel", "build_command", "list_models", "vllm_launcher"]
