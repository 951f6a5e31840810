"""``vllm serve`` for a coder or a judge: the command line, the process, its health, its clean stop.

The server runs in its own process group (``start_new_session``), so that stopping it stops every worker vLLM
forked for tensor parallelism: SIGTERM to the group, then SIGKILL to the group after a grace period. The base
URL printed once it is healthy is the ``base_url`` that judge configs, recipes and rollouts take.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubric_rl.serve.endpoint import healthy

logger = logging.getLogger(__name__)

Role = Literal["coder", "judge"]
INSTALL_HINT = (
    "vllm is not installed here. On a GPU machine: pip install 'verl[vllm]==0.9.1' (vllm 0.24.0 with the torch "
    "it needs), or pip install vllm; or name the executable with --vllm-executable"
)


class ServeError(RuntimeError):
    """The server could not be started, or did not become healthy."""


class ServeConfig(BaseModel):
    """One served model."""

    model_config = ConfigDict(extra="forbid")

    role: Role = Field(description="coder: the policy being evaluated; judge: the rubric judge.")
    model: str = Field(description="Model path or hub name, as vllm serve takes it.")
    tensor_parallel: int | None = Field(
        default=None, ge=1, description="GPUs per replica; None: the fewest that leave room for a KV cache."
    )
    max_model_len: int = Field(
        default=32768, ge=256, description="Context length: prompt (reference + feedback) plus a whole program."
    )
    host: str = Field(default="127.0.0.1", description="Interface to bind; 0.0.0.0 to serve other machines.")
    port: int = Field(default=8000, ge=1, le=65535)
    gpu_memory_utilization: float = Field(default=0.90, gt=0, le=1)
    served_model_name: str | None = Field(default=None, description="Name clients send; None: the model argument.")
    gpu_memory_gib: float = Field(default=80.0, gt=0, description="Memory of one GPU, for the default TP.")
    extra_args: list[str] = Field(default_factory=list, description="Passed to vllm serve as they are.")

    @property
    def name(self) -> str:
        return self.served_model_name or self.model

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"


def default_tensor_parallel(model: str, gpu_gib: float) -> int:
    """The fewest GPUs (1, 2, 4, 8) whose bf16 weight shard takes at most 60% of a GPU, leaving the rest to the
    KV cache; 1 where the model's size is unknown here."""
    from rubric_rl.recipes.model_spec import load_model_spec

    spec, _ = load_model_spec(model)
    if spec is None:
        return 1
    weights_gib = spec.n_params * 2 / 1024**3
    return next((tp for tp in (1, 2, 4, 8) if weights_gib / tp <= 0.6 * gpu_gib), 8)


def vllm_launcher() -> list[str]:
    """How to run ``vllm``: its console script, or its module under this Python; ServeError if neither."""
    exe = shutil.which("vllm")
    if exe:
        return [exe]
    if importlib.util.find_spec("vllm") is not None:
        return [sys.executable, "-m", "vllm.entrypoints.cli.main"]
    raise ServeError(INSTALL_HINT)


def build_command(config: ServeConfig, launcher: list[str] | None = None) -> list[str]:
    """The ``vllm serve`` command line for ``config`` (``launcher`` replaces the ``vllm`` executable)."""
    tp = config.tensor_parallel or default_tensor_parallel(config.model, config.gpu_memory_gib)
    return [
        *(launcher if launcher is not None else vllm_launcher()),
        "serve",
        config.model,
        "--host", config.host,
        "--port", str(config.port),
        "--served-model-name", config.name,
        "--tensor-parallel-size", str(tp),
        "--max-model-len", str(config.max_model_len),
        "--gpu-memory-utilization", f"{config.gpu_memory_utilization:g}",
        "--dtype", "bfloat16",
        "--enable-prefix-caching",  # every request of a skill or a rubric shares its long system prompt
        "--generation-config", "vllm",  # sampling as the client asks, not the model's generation_config.json
        *config.extra_args,
    ]  # fmt: skip


class ServedModel:
    """A ``vllm serve`` process: ``start()``, ``wait_healthy()``, ``stop()``; or ``with ServedModel(...)``."""

    def __init__(self, config: ServeConfig, launcher: list[str] | None = None, log_file: Path | None = None):
        self.config = config
        self.command = build_command(config, launcher)
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        if self.log_file is not None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_file.open("ab")
        logger.info("starting: %s", " ".join(self.command))
        try:
            self.process = subprocess.Popen(
                self.command, start_new_session=True, stdout=self._log, stderr=subprocess.STDOUT if self._log else None
            )
        except FileNotFoundError:
            raise ServeError(f"{self.command[0]}: not found. {INSTALL_HINT}") from None

    def wait_healthy(self, timeout_s: float, poll_s: float = 1.0, cancel: threading.Event | None = None) -> None:
        """Until the server is healthy and lists the model. ServeError if it exits, ``cancel`` is set or the time
        runs out; the caller stops it (``stop()``, or leaving the ``with`` block)."""
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServeError(f"the server exited with code {code} before it became healthy")
            if healthy(self.config.base_url, self.config.name):
                return
            if cancel is not None and cancel.is_set():
                raise ServeError("interrupted before the server became healthy")
            if time.monotonic() >= deadline:
                raise ServeError(f"the server was not healthy after {timeout_s:g} s")
            if cancel is not None:
                cancel.wait(poll_s)
            else:
                time.sleep(poll_s)

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM to the server's process group, SIGKILL after ``grace_s``; its exit code."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return proc.returncode

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, sig)  # the group the server leads (start_new_session)
        except ProcessLookupError:
            pass

    def __enter__(self) -> ServedModel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
