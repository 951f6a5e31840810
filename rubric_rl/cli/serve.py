"""``rubric-rl serve``: a coder or a judge behind ``vllm serve``, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import shlex
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from rubric_rl.cli.common import fail

if TYPE_CHECKING:
    from rubric_rl.serve import ServedModel


def serve(
    role: Annotated[Literal["coder", "judge"], typer.Argument(help="coder (the policy) or judge (the rubric judge).")],
    model: Annotated[str, typer.Option(help="Model path or hub name, e.g. Qwen/Qwen2.5-Coder-32B-Instruct.")],
    tp: Annotated[
        int | None,
        typer.Option(
            "--tp",
            help="Tensor-parallel GPUs (default: the fewest that leave room for a KV "
            "cache; 2 for a 32B model on 80 GB GPUs).",
        ),
    ] = None,
    max_model_len: Annotated[int, typer.Option(help="Context length: prompt plus a whole program.")] = 32768,
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface (0.0.0.0 to serve other machines).")] = "127.0.0.1",
    gpu_memory_utilization: Annotated[float, typer.Option(help="vLLM's share of each GPU.")] = 0.90,
    served_model_name: Annotated[str | None, typer.Option(help="Name clients send (default: --model).")] = None,
    startup_timeout: Annotated[float, typer.Option(help="Seconds to wait for health (a 32B load takes minutes).")] = (
        1800.0
    ),
    log_file: Annotated[Path | None, typer.Option(help="Write the server's output here instead of the terminal.")] = (
        None
    ),
    vllm_executable: Annotated[
        str | None, typer.Option(help="Command that runs vllm (default: `vllm` on PATH), e.g. /opt/venv/bin/vllm.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the command line; start nothing.")] = False,
) -> None:
    """Start `vllm serve` for a coder or judge model, wait until it is healthy, print its OpenAI base URL, and keep
    it up until Ctrl-C or SIGTERM, when its whole process group is stopped."""
    from pydantic import ValidationError

    from rubric_rl.serve import ServeConfig, ServedModel, build_command
    from rubric_rl.serve.server import ServeError

    try:
        config = ServeConfig(
            role=role,
            model=model,
            tensor_parallel=tp,
            max_model_len=max_model_len,
            port=port,
            host=host,
            gpu_memory_utilization=gpu_memory_utilization,
            served_model_name=served_model_name,
        )
    except ValidationError as e:
        err = e.errors()[0]
        raise fail(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None
    launcher = shlex.split(vllm_executable) if vllm_executable else None
    try:
        command = build_command(config, launcher)
    except ServeError as e:
        raise fail(str(e)) from None
    typer.echo(" ".join(shlex.quote(c) for c in command))
    if dry_run:
        return
    _serve_until_stopped(ServedModel(config, launcher=launcher, log_file=log_file), startup_timeout)


def _serve_until_stopped(server: ServedModel, startup_timeout: float) -> None:
    """Start the server, wait until it is healthy, print how to reach it, and keep it up until Ctrl-C or SIGTERM
    (or until it exits by itself, an error)."""
    from rubric_rl.serve.server import ServeError

    config = server.config
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server.start()
        server.wait_healthy(startup_timeout, poll_s=1.0, cancel=stop)
        typer.secho(f"{config.role} {config.name} is up: base_url {config.base_url}", fg=typer.colors.GREEN)
        typer.echo(
            f"  e.g. reward.custom_reward_function.reward_kwargs.judge.base_url={config.base_url}"
            if config.role == "judge"
            else f"  e.g. --base-url {config.base_url} --model {config.name}"
        )
        while not stop.wait(1.0):
            if server.process is not None and server.process.poll() is not None:
                raise ServeError(f"the server exited with code {server.process.returncode}")
    except ServeError as e:
        server.stop()
        raise fail(str(e)) from None
    code = server.stop()
    typer.secho(f"stopped (server exit code {code})", err=True)
