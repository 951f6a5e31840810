"""Captures and builds ahead of execution, shared between the candidates that need the same one (cpu backend)."""

import asyncio
import threading
import uuid
from pathlib import Path

import pytest

from rubric_rl.sandbox import SandboxConfig
from rubric_rl.sandbox.build.builder import Builder
from rubric_rl.sandbox.build.capture_cache import CaptureCache
from rubric_rl.sandbox.executors import ExecutorConfig
from rubric_rl.tasks import load_tasks

pytestmark = pytest.mark.slow


def test_a_candidate_waiting_for_anothers_build_leaves_the_build_workers_to_the_rest(
    build_cache: Path, examples_dir: Path, monkeypatch
):
    # Two responses sharing an extension, then a compile error, on 2 build workers. The second response used to
    # wait for the first one's build on the build cache's lock, holding the other build worker, so the compile
    # error (a second's work) waited for a build that was not its own: on an H100 a 16 x 8 reward batch scored
    # its first compile error 228 s in, with most cores idle. The first build below is held until the compile
    # error has its Verdict; held 90 s in vain, the compile error waited for it.
    from rubric_rl.sandbox.executors.local import LocalExecutor

    sandbox = SandboxConfig(
        backend="cpu",
        build={"cache_dir": build_cache},
        timing={"trials": 5, "warmup_trials": 1, "compile_baseline": False},
        limits={"run_timeout_s": 120},
    )
    marker = f"// build {uuid.uuid4().hex}"  # a build of its own, whatever the shared cache already holds
    honest = (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()
    first = honest.replace("#include <torch/extension.h>", f"#include <torch/extension.h>\n{marker}", 1)
    second = first + "\n# the same kernel, another response\n"
    broken = (examples_dir / "fused_add_relu" / "candidate_compile_error.py").read_text()
    task = {t.id: t for t in load_tasks(examples_dir / "tasks.jsonl")}["T-1"]

    compiling, broken_done = threading.Event(), threading.Event()
    held_in_vain: list[bool] = []
    compile_ = Builder._compile

    def held_compile(self, key, prepared, candidate, mode):
        if any(marker in src for src in prepared.cpp_sources):
            compiling.set()
            held_in_vain.append(not broken_done.wait(90))
        return compile_(self, key, prepared, candidate, mode)

    captured = threading.Semaphore(0)
    put = CaptureCache.put

    def counted_put(self, candidate, backend, specs):
        put(self, candidate, backend, specs)
        captured.release()

    monkeypatch.setattr(Builder, "_compile", held_compile)
    monkeypatch.setattr(CaptureCache, "put", counted_put)
    config = ExecutorConfig(build_workers=2, cpu_slots=2, spare_workers=0, reuse_baselines=False)
    ex = LocalExecutor(sandbox, config)

    async def scenario():
        one = asyncio.ensure_future(ex.evaluate(task, first))
        assert await asyncio.to_thread(compiling.wait, 120), "the first response's build never started"
        two = asyncio.ensure_future(ex.evaluate(task, second))
        for _ in range(2):  # both responses captured: the second now needs the first one's build
            assert await asyncio.to_thread(captured.acquire, True, 120)
        await asyncio.sleep(0.5)
        compile_error = await ex.evaluate(task, broken)
        broken_done.set()
        return compile_error, await one, await two

    try:
        compile_error, one, two = asyncio.run(scenario())
    finally:
        broken_done.set()
        asyncio.run(ex.close())
    assert compile_error.status == "compile_error", compile_error.errors
    assert held_in_vain == [False], "the compile error waited for another candidate's build"
    assert one.status == two.status == "correct", (one.errors, two.errors)
    assert one.builds[0].key == two.builds[0].key
    prebuilds = ex.stats()["prebuilds"]
    assert prebuilds["shared"] == 1  # the second response awaited the first one's build
    assert prebuilds["build"]["n"] == 2  # the shared extension's build and the compile error's, no third
    assert prebuilds["capture"]["n"] == 3
