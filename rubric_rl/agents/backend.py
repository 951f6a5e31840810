"""The sandbox behind the tools: one evaluation executor and one compile-only evaluator per process and config,
both with the tools' own input seed.

The seed is the point. The sandbox draws every input (trials, redrawn distributions, warm-up, timed rounds,
profile) from its config's base seed plus fixed offsets, and the reward evaluates with its own base seed. The
tools evaluate with a base seed at least ``SEED_SPAN`` away from the reward's, so no input the tools' runs saw
is an input of the final evaluation: a program tuned to the tools' inputs (or to their seeds, which the
feedback names) is scored on inputs it never met. The final evaluation is also a fresh run in a fresh worker;
nothing the tools computed is reused for the reward.

Only top-level names of ``rubric_rl.sandbox`` and ``rubric_rl.sandbox.executors`` are used; the seed field is
found by name in SandboxConfig's schema (top level or one section down), so it survives the config being
regrouped into sections.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from pydantic import BaseModel

from rubric_rl.agents.config import AgentConfigError, ToolsConfig
from rubric_rl.reward.config import RewardConfig
from rubric_rl.reward.runtime import make_executor_for, resolve_backend, use_ray
from rubric_rl.sandbox import Evaluator, KernelMetricsReport, SandboxConfig, Verdict
from rubric_rl.tasks import Task

log = logging.getLogger(__name__)

SEED_SPAN = 100_000
"""Seeds the sandbox derives from one base seed lie in [base, base + SEED_SPAN): trials at +0.., redrawn
distributions at +1000.., warm-up at +5000, timed rounds at +10000 + round (at most 20 x perf_trials rounds),
the profile at +20000."""


TOOL_SEED_OFFSET = 1 << 30
"""The tools' default base seed is the final evaluation's plus this."""


def field_path(model: type[BaseModel], name: str) -> tuple[str, ...]:
    """Where the one field called ``name`` lives in ``model``: at the top level or in one nested section."""
    hits: list[tuple[str, ...]] = []
    for fname, info in model.model_fields.items():
        if fname == name:
            hits.append((fname,))
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and name in ann.model_fields:
            hits.append((fname, name))
    if len(hits) != 1:
        raise AgentConfigError(f"SandboxConfig: expected one field {name!r}, found {['.'.join(h) for h in hits]}")
    return hits[0]


def read_field(config: BaseModel, path: tuple[str, ...]) -> Any:
    node: Any = config
    for part in path:
        node = getattr(node, part)
    return node


def with_field(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of the field mapping ``data`` with ``value`` at ``path`` (nested sections merged, not replaced)."""
    out = dict(data)
    if len(path) == 1:
        out[path[0]] = value
        return out
    section = dict(out.get(path[0]) or {})
    out[path[0]] = with_field(section, path[1:], value)
    return out


def sandbox_seed(config: SandboxConfig) -> int:
    return int(read_field(config, field_path(SandboxConfig, "seed")))


def tool_seed(final_seed: int, wanted: int | None = None) -> int:
    """The tools' base seed: ``wanted`` if it is far enough from ``final_seed``, else an error; None: the final
    seed plus ``TOOL_SEED_OFFSET`` (the same in every process, so a node's shared tool service agrees with it)."""
    if wanted is not None:
        if abs(wanted - final_seed) < SEED_SPAN:
            raise AgentConfigError(
                f"tools.seed: {wanted} is within {SEED_SPAN} of the final evaluation's seed {final_seed}; the tools "
                "would evaluate on the inputs that score the program"
            )
        return wanted
    return final_seed + TOOL_SEED_OFFSET


def final_sandbox_seed(reward_kwargs: dict[str, Any], backend: str) -> int:
    """The base seed of the final evaluation the reward runs with ``reward_kwargs``."""
    reward = RewardConfig.from_reward_kwargs(reward_kwargs)
    return sandbox_seed(reward.sandbox_config("cuda" if backend == "cuda" else "cpu"))


class SandboxTools:
    """The evaluation service of the tools of one process (see ``get_sandbox_tools``)."""

    def __init__(self, config: ToolsConfig, seed: int) -> None:
        path = field_path(SandboxConfig, "seed")
        service = RewardConfig.model_validate(
            {
                "rule": {"name": "milestone"},
                "mix": {"name": "none"},
                "backend": config.backend,
                "sandbox": with_field(config.sandbox, path, seed),
                "executor": config.executor,
                "service": config.service.model_dump(),
            }
        )
        self.seed = seed
        self.ncu = config.ncu
        self.backend = resolve_backend(service)
        self.sandbox = service.sandbox_config(self.backend)
        self.executor = make_executor_for(service, self.backend, use_ray(service))
        self.evaluator = Evaluator(self.sandbox)
        # Compiles queue here, not in threads of the default executor (verl tokenises on that one).
        self._builds = ThreadPoolExecutor(config.max_parallel_compiles, thread_name_prefix="agent-compile")
        log.info("agent tools: backend %s, seed %d, executor %s", self.backend, seed, type(self.executor).__name__)

    async def evaluate(self, task: Task, program: str, deadline_s: float) -> Verdict:
        """A full evaluation with the tools' seed (never raises for the candidate: a Verdict says what failed)."""
        return await self.executor.evaluate(task, program, deadline_s=deadline_s)

    async def kernel_metrics(self, task: Task, program: str) -> KernelMetricsReport | None:
        """Nsight Compute's metrics of the program's kernels, with the tools' seed; None where they are off or the
        backend has no GPU. A run past its bound is a report saying so (never raises for the program)."""
        if self.ncu is None or self.backend != "cuda":
            return None
        bound = self.ncu.timeout_s + 60.0  # the run's own limit, and the worker's start and the queue
        try:
            return await asyncio.wait_for(self.executor.kernel_metrics(task, program, self.ncu), bound)
        except (TimeoutError, asyncio.TimeoutError):
            return KernelMetricsReport(error=f"Nsight Compute did not finish within {bound:.0f} s", seconds=bound)

    async def compile(self, program: str) -> Any:
        """Static and native checks and a compile (``Evaluator.check_compiles``): its report. Where this machine
        can link what it compiles (the cpu backend, or a CUDA build of torch), the compile is the full build the
        next evaluation of the program needs, so the agent's ``check`` after ``compile`` finds it built; else
        (a CUDA backend on a machine without CUDA torch) the object files only."""
        loop = asyncio.get_running_loop()
        mode: Literal["objects", "full"] = "full" if self._can_link() else "objects"
        return await loop.run_in_executor(self._builds, self.evaluator.check_compiles, program, self._arch(), mode)

    def _can_link(self) -> bool:
        if self.backend != "cuda":
            return True
        import torch

        return torch.version.cuda is not None

    def _arch(self) -> str | None:
        if self.backend != "cuda":
            return None
        if self.sandbox.build.arch:
            return self.sandbox.build.arch
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}.{minor}"
        return "9.0"


_lock = threading.Lock()
_backends: dict[str, SandboxTools] = {}


def get_sandbox_tools(config: ToolsConfig, final_seed: int) -> SandboxTools:
    """This process's tools backend for ``config``, its seed away from ``final_seed`` (built on first use)."""
    key = f"{config.model_dump_json()}|{final_seed}"
    with _lock:
        tools = _backends.get(key)
        if tools is None:
            tools = _backends[key] = SandboxTools(config, tool_seed(final_seed, config.seed))
        return tools
