"""Typed configuration of the sandbox: what is checked, how strictly, and within which limits.

Built once (from defaults, a YAML file, CLI flags or a Hydra node converted to a dict) and passed down;
nothing below reads raw dictionaries. Every field says what it controls. Fields are grouped in sections
(``correctness``, ``timing``, ``build``, ``limits``, ``policy``); a key of the flat layout before them, or a
retired one, fails at load with a message that names it and says where it went.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Backend = Literal["cuda", "cpu"]
Severity = Literal["error", "warn", "off"]
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
InputDistribution = Literal["signed", "heavy_tailed"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tolerance(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    atol: float = Field(ge=0, description="Absolute tolerance of torch.allclose-style comparison.")
    rtol: float = Field(ge=0, description="Relative tolerance of torch.allclose-style comparison.")


def _default_tolerances() -> dict[str, Tolerance]:
    # KernelBench's current defaults (get_tolerance_for_precision): fp32 1e-4, fp16/bf16 1e-2, as atol and rtol.
    return {
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "float64": Tolerance(atol=1e-7, rtol=1e-7),
        "float16": Tolerance(atol=1e-2, rtol=1e-2),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    }


def default_reference_cache_mb() -> float:
    """An eighth of the host's physical memory (2048 MB where it cannot be read).

    It must hold every task of a batch at once: least-recently-used eviction keeps nothing when a batch's
    references exceed the budget, as 2 GB did for 12 KernelBench tasks on an H200 (1 hit in 26 lookups; one
    Level 1 task's seven trials of 64M-element outputs are 1.9 GB)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 8 / 2**20
    except (AttributeError, OSError, ValueError):
        return 2048.0


def default_cache_dir() -> Path:
    base = os.environ.get("RUBRIC_RL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "rubric-rl"
    )
    return Path(base) / "build"


class CorrectnessConfig(_Section):
    """How the candidate's outputs are compared with the reference's."""

    trials: int = Field(default=5, ge=1, description="Trials on fresh get_inputs() draws.")
    extra_distributions: list[InputDistribution] = Field(
        default_factory=lambda: ["signed", "heavy_tailed"],  # type: ignore[arg-type]
        description="Extra trials with floating inputs redrawn from these distributions, kept only where the "
        "reference output is finite on them.",
    )
    tolerances: dict[str, Tolerance] = Field(
        default_factory=_default_tolerances, description="Per output dtype (torch dtype name without 'torch.')."
    )
    atol_scale: float | None = Field(
        default=0.01,
        gt=0,
        description="Cap the absolute tolerance at this fraction of each output's RMS, so outputs far smaller than "
        "atol (where zeros would pass) are still checked; None: plain KernelBench tolerances.",
    )
    ship_outputs_max_mb: float | None = Field(
        default=None,
        gt=0,
        description="A trial whose outputs are larger than this is compared on the device inside the worker "
        "(against reference outputs fingerprinted before the candidate loads, and spot-checked by the evaluator on "
        "positions it draws after the output exists) instead of being copied to the evaluator. The reference output "
        "is computed again after the candidate's trial and must match its fingerprint bit for bit, or, for a "
        "reference that does not reproduce its bits, is kept on the device until then. None: 32 MB on cuda, 256 MB "
        "on cpu (see SandboxConfig.ship_outputs_limit_bytes).",
    )
    reference_cache_mb: float = Field(
        default_factory=default_reference_cache_mb,
        ge=0,
        description="Evaluator memory for reference outputs reused across a task's candidates (same reference, "
        "trial plan and device); 0 runs the reference for every candidate. Default: an eighth of the host's memory.",
    )

    @field_validator("tolerances")
    @classmethod
    def _known_dtypes(cls, v: dict[str, Tolerance]) -> dict[str, Tolerance]:
        known = {"float32", "float64", "float16", "bfloat16"}
        unknown = set(v) - known
        if unknown:
            raise ValueError(f"unknown dtype(s) {sorted(unknown)}; tolerances are keyed by {sorted(known)}")
        return {**_default_tolerances(), **v}


class TimingConfig(_Section):
    """How the candidate is timed against eager PyTorch and torch.compile."""

    enabled: bool = Field(default=True, description="Time the candidate against eager (and compile).")
    trials: int = Field(default=100, ge=1, description="Timed calls per model.")
    warmup_trials: int = Field(default=5, ge=0, description="Untimed calls per model before timing.")
    compile_baseline: bool = Field(default=True, description="Also time torch.compile of the reference.")
    compile_mode: CompileMode = Field(default="default", description="torch.compile mode of the baseline.")
    checked_outputs: int = Field(
        default=3, ge=0, description="Timed candidate calls (chosen at random) whose outputs are checked too."
    )
    l2_flush: bool = Field(default=True, description="Overwrite a buffer of twice the L2 before each timed call (GPU).")
    profile_kernels: bool = Field(
        default=True, description="Profile one candidate call to attribute its kernels (GPU)."
    )


class BuildConfig(_Section):
    """How the candidate's extensions are built: the evaluator owns the flags, the arch and the cache."""

    cache_dir: Path = Field(default_factory=default_cache_dir, description="Content-addressed build cache.")
    arch: str | None = Field(
        default=None, description="TORCH_CUDA_ARCH_LIST for builds, e.g. '9.0'; None: the visible device's."
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Wall-clock limit of one extension build.")
    jobs: int | None = Field(default=None, ge=1, description="ninja -j for one build; None: torch's default.")
    use_pch: bool = Field(default=True, description="Compile main.cpp against a shared precompiled torch/extension.h.")
    split_sources: bool = Field(
        default=True,
        description="Rewrite candidates whose .cu holds the torch glue into a kernel-only .cu plus a .cpp glue "
        "file when that is provably safe (faster nvcc); see rubric_rl.sandbox.build.source_split.",
    )

    @field_validator("arch")
    @classmethod
    def _arch_form(cls, v: str | None) -> str | None:
        if v is not None and not all(
            part.replace(".", "").replace("+PTX", "").isdigit() for part in v.replace(";", " ").split()
        ):
            raise ValueError(f"{v!r} is not a TORCH_CUDA_ARCH_LIST value such as '9.0' or '8.0;9.0'")
        return v


class LimitsConfig(_Section):
    """Time and memory the worker may take."""

    run_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Limit on the execution worker's own time (s): the evaluator's builds, device-gate waits and "
        "host-side output comparisons are not counted.",
    )
    load_timeout_s: float = Field(default=120.0, gt=0, description="Limit for importing the candidate and ModelNew.")
    stage_timeout_factor: float = Field(
        default=50.0,
        ge=1,
        description="Loading the candidate, a correctness trial, and the timed rounds may take this many times "
        "what the reference's own import and model, or its trials, took (measured in the same worker) before the "
        "run is a timeout: a hung candidate costs seconds, not run_timeout_s (in RL, one hung sample holds a GRPO "
        "batch).",
    )
    stage_timeout_floor_s: float = Field(
        default=30.0,
        gt=0,
        description="The least a stage limited by stage_timeout_factor gets (a first call's lazy device set-up, a "
        "loaded host). run_timeout_s stays the ceiling.",
    )
    memory_mb: int = Field(default=16384, ge=256, description="Host memory (RSS) limit of the worker.")
    gpu_memory_fraction: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="Share of the GPU's memory an evaluation may use when it has the device to itself; an executor "
        "that runs several evaluations per GPU gives each a part of it (Placement.memory_fraction).",
    )


class HackPolicy(_Section):
    """What the candidate is allowed to do besides running its own kernels (see rubric_rl.sandbox.checks.static
    and rubric_rl.sandbox.checks.guard). ``rules`` overrides the severity of named rules."""

    rules: dict[str, Severity] = Field(
        default_factory=dict, description="Rule id -> error | warn | off; rules not named keep their default."
    )
    allowed_aten_ops: list[str] = Field(
        default_factory=list,
        description="Extra ATen ops (overload packet names such as 'mm' or 'convolution') the candidate may cause "
        "on top of the allocation/view/copy allowlist, e.g. to allow cuBLAS GEMMs or cuDNN convolutions.",
    )
    allowed_libraries: list[Literal["cublas", "cublasLt", "cudnn", "curand", "cufft"]] = Field(
        default_factory=list, description="Libraries the candidate's C++/CUDA may link and call directly."
    )
    min_own_kernel_share: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Minimum share of the candidate forward's GPU time spent in the candidate's own kernels; "
        "below it the status is 'hack' (rule runtime.low_own_kernel_share). 0 records the share only.",
    )
    stop_on_static_error: bool = Field(
        default=True, description="A static 'error' finding ends the evaluation before any build (status 'hack')."
    )

    def severity(self, rule: str, default: Severity) -> Severity:
        return self.rules.get(rule, default)


# Keys of the flat layout (sandbox config schema 1) and where each went.
_MOVED = {
    "correctness_trials": "correctness.trials",
    "extra_distributions": "correctness.extra_distributions",
    "tolerances": "correctness.tolerances",
    "atol_scale": "correctness.atol_scale",
    "ship_outputs_max_mb": "correctness.ship_outputs_max_mb",
    "reference_cache_mb": "correctness.reference_cache_mb",
    "measure_performance": "timing.enabled",
    "perf_trials": "timing.trials",
    "warmup_trials": "timing.warmup_trials",
    "compile_baseline": "timing.compile_baseline",
    "compile_mode": "timing.compile_mode",
    "checked_timed_outputs": "timing.checked_outputs",
    "l2_flush": "timing.l2_flush",
    "profile_kernels": "timing.profile_kernels",
    "cache_dir": "build.cache_dir",
    "arch": "build.arch",
    "build_timeout_s": "build.timeout_s",
    "build_jobs": "build.jobs",
    "use_pch": "build.use_pch",
    "split_sources": "build.split_sources",
    "run_timeout_s": "limits.run_timeout_s",
    "load_timeout_s": "limits.load_timeout_s",
    "memory_limit_mb": "limits.memory_mb",
    "gpu_memory_fraction": "limits.gpu_memory_fraction",
}
# Finished experiments: their measured answers are constants now (see docs/measurements.md).
_RETIRED = {
    "worker_aslr": "workers always start with the system's address-space randomisation",
    "min_timing_s": "timed rounds are always timing.trials calls",
    "split_glue_opt_level": "a split build's host glue always compiles at -O1 (build.extension.SPLIT_GLUE_OPT_LEVEL)",
    "cpu_malloc_tunables": "cpu workers always get fixed malloc thresholds (run.process.CPU_MALLOC_TUNABLES)",
    "ship_timed_outputs_max_mb": "fixed at 16 MB (run.worker's TIMED_OUTPUTS_SHIP_MB)",
    "max_message_mb": "fixed at 4096 MB (run.process.MAX_MESSAGE_BYTES)",
}


class SandboxConfig(BaseModel):
    """Everything the sandbox needs to judge one candidate."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = Field(default="cpu", description="cuda: CUDA kernels on a GPU; cpu: C++/OpenMP extensions.")
    seed: int = Field(default=42, description="Seed for model construction and input generation.")
    cpu_threads: int | None = Field(default=None, ge=1, description="Threads for torch and OpenMP; None: all cores.")
    correctness: CorrectnessConfig = Field(default_factory=CorrectnessConfig, description="Output comparison.")
    timing: TimingConfig = Field(default_factory=TimingConfig, description="Timing against eager and compile.")
    build: BuildConfig = Field(default_factory=BuildConfig, description="Extension builds.")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="The worker's time and memory.")
    policy: HackPolicy = Field(default_factory=HackPolicy, description="Anti-hacking policy.")

    @model_validator(mode="before")
    @classmethod
    def _no_flat_or_retired_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key in _MOVED:
                    raise ValueError(f"'{key}' is now '{_MOVED[key]}' (the sandbox config is in sections)")
                if key in _RETIRED:
                    raise ValueError(f"'{key}' was retired: {_RETIRED[key]}")
        return data

    def ship_outputs_limit_bytes(self) -> int:
        """Bytes of one trial's outputs above which they are compared in the worker
        (``correctness.ship_outputs_max_mb``).

        The default follows where comparing is cheaper. On an H100, shipping and comparing on the host took a
        256 MB output's correctness stage (KernelBench L2-40) 6.7 s and a 64 MB one's (L1-1) 2.7 s; compared on the
        GPU they took 0.4 s and 0.2 s. On a CPU the worker's comparison is host work that ships nothing, and it was
        the slower one (11 s against 2-3 s for 64 MB outputs on 2 cores), so only outputs too large to ship go there.
        """
        mb = self.correctness.ship_outputs_max_mb
        if mb is None:
            mb = 32.0 if self.backend == "cuda" else 256.0
        return int(mb * 2**20)

    def updated(self, **changes: Any) -> SandboxConfig:
        """A validated copy with ``changes`` merged in: a top-level field's value, or a section's fields as a
        mapping (``config.updated(timing={"trials": 7}, seed=1)``)."""
        data = self.model_dump()
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "tolerances":
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return SandboxConfig.model_validate(data)
