"""``rubric-rl serve``: the vllm command line, the health wait against a local OpenAI-protocol server, and a
clean stop of the server's whole process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_env import child_env
from typer.testing import CliRunner

from rubric_rl.cli import app
from rubric_rl.serve import ServeConfig, ServedModel, build_command, list_models
from rubric_rl.serve.server import ServeError

FAKE = [sys.executable, str(Path(__file__).resolve().parent / "fake_vllm.py")]
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_command_line_for_a_32b_judge():
    config = ServeConfig(role="judge", model="Qwen/Qwen2.5-Coder-32B-Instruct", port=8123)
    cmd = build_command(config, launcher=["vllm"])
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen2.5-Coder-32B-Instruct"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert flags["--tensor-parallel-size"] == "2"  # 61 GiB of bf16 weights: two 80 GB GPUs leave room for KV
    assert flags["--max-model-len"] == "32768" and flags["--port"] == "8123" and flags["--host"] == "127.0.0.1"
    assert flags["--served-model-name"] == "Qwen/Qwen2.5-Coder-32B-Instruct" and flags["--dtype"] == "bfloat16"
    assert "--enable-prefix-caching" in cmd
    assert config.base_url == "http://127.0.0.1:8123/v1"
    small = build_command(ServeConfig(role="coder", model="Qwen/Qwen2.5-Coder-7B-Instruct", tensor_parallel=4), ["v"])
    assert small[small.index("--tensor-parallel-size") + 1] == "4"


def test_without_vllm_it_says_how_to_install(monkeypatch):
    import importlib.util
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(ServeError, match="pip install"):
        build_command(ServeConfig(role="judge", model="m", tensor_parallel=1))
    result = CliRunner().invoke(app, ["serve", "judge", "--model", "m", "--tp", "1", "--dry-run"])
    assert result.exit_code == 2 and "vllm is not installed" in result.output


def test_health_wait_and_clean_stop_of_the_process_group(tmp_path):
    pid_file = tmp_path / "worker.pid"
    config = ServeConfig(
        role="coder",
        model="tiny",
        tensor_parallel=1,
        port=free_port(),
        extra_args=["--startup-delay", "1.0", "--pid-file", str(pid_file)],
    )
    with ServedModel(config, launcher=FAKE) as server:
        server.wait_healthy(timeout_s=60, poll_s=0.2)
        assert list_models(config.base_url) == ["tiny"]
        worker = int(pid_file.read_text())
        assert alive(worker)
    assert server.process is not None and server.process.poll() is not None
    deadline = time.monotonic() + 10
    while alive(worker) and time.monotonic() < deadline:  # reaped by init once killed
        time.sleep(0.1)
    assert not alive(worker), "the server's worker outlived it: the process group was not stopped"


def test_a_server_that_exits_is_reported():
    config = ServeConfig(
        role="judge", model="tiny", tensor_parallel=1, port=free_port(), extra_args=["--exit-code", "3"]
    )
    with ServedModel(config, launcher=FAKE) as server, pytest.raises(ServeError, match="exited with code 3"):
        server.wait_healthy(timeout_s=30, poll_s=0.2)


def test_cli_prints_the_base_url_and_stops_on_sigterm(tmp_path):
    port = free_port()
    cmd = [
        sys.executable,
        "-c",
        "from rubric_rl.cli import main; main()",
        "serve",
        "judge",
        "--model",
        "tiny",
        "--tp",
        "1",
        "--port",
        str(port),
        "--vllm-executable",
        " ".join(FAKE),
    ]
    env = child_env()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "is up" in line or not line:
                break
        assert f"base_url http://127.0.0.1:{port}/v1" in "".join(lines), "".join(lines)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
