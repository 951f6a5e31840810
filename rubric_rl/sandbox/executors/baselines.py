"""Per-task baselines: eager and torch.compile timed once per task and device, then reused.

A task's torch.compile warm-up alone takes 0.4-9 s on Level 2/3 programs, so it is not paid per candidate.
Baselines are kept in memory and as JSON beside the build cache, keyed by the reference's text, the device
name, the torch version and the timing settings; one measurement per key even under concurrency. Each
candidate's evaluation still re-times eager beside it, and the Verdict reports the drift between the two.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.measure.baseline import TaskBaseline

log = logging.getLogger(__name__)


class BaselineDeferred(Exception):
    """The baseline is not measured on its own: the task's candidates time eager and compile beside them, and the
    first that does gives the task its baseline (``BaselineStore.put``). Nothing is recorded as failed."""


# Part of the key: a baseline kept on disk in another layout (1: before per-round times; 2: flat timing settings)
# is measured again.
BASELINE_SCHEMA = 3


def baseline_key(reference: str, config: SandboxConfig, device_name: str, torch_version: str) -> str:
    timing = {
        "timing": config.timing.model_dump(
            mode="json", include={"trials", "warmup_trials", "compile_mode", "compile_baseline", "l2_flush"}
        ),
        "cpu_threads": config.cpu_threads,
        "seed": config.seed,
        "backend": config.backend,
    }
    blob = json.dumps(
        {
            "ref": reference,
            "timing": timing,
            "device": device_name,
            "torch": torch_version,
            "schema": BASELINE_SCHEMA,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class BaselineStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._memory: dict[str, TaskBaseline | None] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.measured = 0
        self.reused = 0
        self.failed = 0
        self.deferred = 0

    def measured_baselines(self) -> list[TaskBaseline]:
        """The baselines held in memory (measured or loaded by this store)."""
        return [b for b in self._memory.values() if b is not None]

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> TaskBaseline | None:
        if key in self._memory:
            return self._memory[key]
        path = self._path(key)
        if path.exists():
            try:
                self._memory[key] = TaskBaseline.model_validate_json(path.read_text())
                return self._memory[key]
            except ValueError:
                log.warning("unreadable baseline %s; measuring again", path)
        return None

    async def get_or_measure(self, key: str, measure) -> TaskBaseline | None:
        """The baseline for ``key``; ``measure`` (an async callable) runs at most once per key."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # locks belong to one event loop (see LocalExecutor._queues)
            self._loop, self._locks = loop, {}
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._memory or self._path(key).exists():
                found = self.get(key)
                if found is not None or key in self._memory:
                    self.reused += 1
                    return found
            try:
                baseline = await measure()
            except BaselineDeferred as e:
                log.info("baseline %s deferred: %s", key[:8], e)
                self.deferred += 1
                return None
            except Exception as e:  # a baseline that cannot be measured: candidates then time their own
                log.warning("baseline %s failed: %s", key[:8], e)
                self.failed += 1
                self._memory[key] = None
                return None
            self.measured += 1
            self._keep(key, baseline)
            return baseline

    def put(self, key: str, baseline: TaskBaseline) -> None:
        """Keep a baseline measured elsewhere (beside a candidate, for a deferred one); a kept one stays."""
        if self.get(key) is None:
            self.measured += 1
            self._keep(key, baseline)

    def _keep(self, key: str, baseline: TaskBaseline) -> None:
        self._memory[key] = baseline
        tmp = self._path(key).with_suffix(".tmp")
        tmp.write_text(baseline.model_dump_json())
        tmp.replace(self._path(key))
