"""Typed configuration of the sandbox: what is checked, how strictly, and within which limits.

Built once (from defaults, a YAML file, CLI flags or a Hydra node converted to a dict) and passed down;
nothing below reads raw dictionaries. Every field says what it controls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Backend = Literal["cuda", "cpu"]
Severity = Literal["error", "warn", "off"]
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
InputDistribution = Literal["signed", "heavy_tailed"]


class Tolerance(BaseModel):
    model_config = ConfigDict(frozen=True)
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
    references exceed the budget, as 2 GB did for 12 KernelBench tasks on the H200 (1 hit in 26 lookups; one
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


class HackPolicy(BaseModel):
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


class SandboxConfig(BaseModel):
    """Everything the sandbox needs to judge one candidate."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = Field(default="cpu", description="cuda: CUDA kernels on a GPU; cpu: C++/OpenMP extensions.")
    seed: int = Field(default=42, description="Seed for model construction and input generation.")
    correctness_trials: int = Field(default=5, ge=1, description="Trials on fresh get_inputs() draws.")
    extra_distributions: list[InputDistribution] = Field(
        default_factory=lambda: ["signed", "heavy_tailed"],  # type: ignore[arg-type]
        description="Extra correctness trials with floating inputs redrawn from these distributions, kept only "
        "where the reference output is finite on them.",
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
        "positions it draws after the output exists) instead of being copied to the evaluator: multi-GB outputs "
        "(KernelBench Level 1 has 6 GB ones) would take minutes and host memory to ship. The reference output is "
        "computed again after the candidate's trial and must match its fingerprint bit for bit, or, for a "
        "reference that does not reproduce its bits, kept on the device until then. Inputs larger than this, and "
        "those of such trials, are drawn again for the candidate's trial rather than held on the device. None: "
        "32 MB on cuda, 256 MB on cpu (see ship_outputs_limit_bytes).",
    )
    ship_timed_outputs_max_mb: float = Field(
        default=16.0,
        gt=0,
        description="A checked timed round whose candidate and eager outputs together are larger than this is "
        "compared on the device inside the worker, with the evaluator's spot check, instead of being copied to "
        "the evaluator: the copy runs while the device is held for timing alone (on an H200, L1-40's rounds, "
        "which copied two 256 MB outputs in each of 4 checked rounds, took 2.9 s for 0.9 s of timed calls).",
    )
    reference_cache_mb: float = Field(
        default_factory=default_reference_cache_mb,
        ge=0,
        description="Evaluator memory for reference outputs reused across a task's candidates (same reference, "
        "trial plan and device; see rubric_rl.sandbox.measure.reference_cache); 0 runs the reference for every "
        "candidate. "
        "Default: an eighth of the host's memory.",
    )
    measure_performance: bool = Field(default=True, description="Time the candidate against eager (and compile).")
    perf_trials: int = Field(default=100, ge=1, description="Timed calls per model.")
    warmup_trials: int = Field(default=5, ge=0, description="Untimed calls per model before timing.")
    min_timing_s: float = Field(
        default=0.0,
        ge=0,
        description="Timed rounds go on past perf_trials until they span this many seconds (at most 20x "
        "perf_trials): a short program's 100 rounds take milliseconds, all inside one of the host's slow or quick "
        "spells; spanning several, each model's median keeps to the host's usual state (timing.run_rounds). Off by "
        "default: on an H100 host, 1.0 s did not lower the CV of 4 candidates x 4 evaluations (L3-34 2.04 % "
        "against 1.65 %, L1-12 0.58 % against 0.21 %).",
    )
    compile_baseline: bool = Field(default=True, description="Also time torch.compile of the reference.")
    compile_mode: CompileMode = Field(default="default", description="torch.compile mode of the baseline.")
    checked_timed_outputs: int = Field(
        default=3, ge=0, description="Timed candidate calls (chosen at random) whose outputs are checked too."
    )
    l2_flush: bool = Field(default=True, description="Overwrite a buffer of twice the L2 before each timed call (GPU).")
    profile_kernels: bool = Field(
        default=True, description="Profile one candidate call to attribute its kernels (GPU)."
    )
    cpu_threads: int | None = Field(default=None, ge=1, description="Threads for torch and OpenMP; None: all cores.")
    worker_aslr: bool = Field(
        default=True,
        description="False: workers start with address-space layout randomisation off (personality "
        "ADDR_NO_RANDOMIZE, where the kernel allows it), so each has the same layout. An experiment against "
        "per-process timing levels: KernelBench L3-34's candidate (256 dependent kernel launches) measured 0.90-0.94 "
        "ms from one worker to the next on an H100 and held within 0.1% inside each, a 2.5% speedup CV.",
    )
    cpu_malloc_tunables: str = Field(
        default="glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824",
        description="GLIBC_TUNABLES of cpu-backend workers ('' leaves glibc's defaults). By its adaptive defaults "
        "glibc hands large freed buffers back to the OS or not depending on the process's history, so whether a "
        "timed call's multi-MB temporaries page-faulted afresh changed from one evaluation to the next: eager's "
        "median on the bundled example was 0.5-0.7 ms in some workers, 2.2-3.0 ms in others (speedup CV 42% over 25 "
        "evaluations on 2 cores). Fixed thresholds keep buffers under 32 MB in the heap (CV 5%).",
    )

    build_timeout_s: float = Field(default=600.0, gt=0, description="Wall-clock limit of one extension build.")
    run_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Limit on the execution worker's own time (s): the evaluator's builds, device-gate waits and "
        "host-side output comparisons are not counted.",
    )
    load_timeout_s: float = Field(
        default=120.0, gt=0, description="Limit for importing the candidate and building ModelNew."
    )
    memory_limit_mb: int = Field(default=16384, ge=256, description="Host memory (RSS) limit of the worker.")
    gpu_memory_fraction: float = Field(default=0.9, gt=0, le=1, description="Share of GPU memory the worker may use.")
    max_message_mb: int = Field(default=4096, ge=1, description="Largest message the worker may send (outputs).")

    cache_dir: Path = Field(default_factory=default_cache_dir, description="Content-addressed build cache.")
    arch: str | None = Field(
        default=None, description="TORCH_CUDA_ARCH_LIST for builds, e.g. '9.0'; None: the visible device's."
    )
    build_jobs: int | None = Field(default=None, ge=1, description="ninja -j for one build; None: torch's default.")
    use_pch: bool = Field(
        default=True, description="Compile main.cpp against a shared precompiled torch/extension.h (GCC)."
    )
    split_sources: bool = Field(
        default=True,
        description="Rewrite candidates whose .cu holds the torch glue into a kernel-only .cu plus a .cpp glue "
        "file when that is provably safe (faster nvcc); see rubric_rl.sandbox.build.source_split.",
    )
    split_glue_opt_level: Literal["-O0", "-O1", "-O2", "-O3"] = Field(
        default="-O1",
        description="Host optimisation level of a split build's .cpp (torch glue and bindings only; kernels stay "
        "at -O3). With the shared PCH its compile took 10.3 s at -O3 and 6.7 s at -O1 on 2 cores (KernelBench "
        "L2-40's candidate); a bound call's host overhead moved by under 0.1 us.",
    )
    policy: HackPolicy = Field(default_factory=HackPolicy, description="Anti-hacking policy.")

    @field_validator("tolerances")
    @classmethod
    def _known_dtypes(cls, v: dict[str, Tolerance]) -> dict[str, Tolerance]:
        known = {"float32", "float64", "float16", "bfloat16"}
        unknown = set(v) - known
        if unknown:
            raise ValueError(f"unknown dtype(s) {sorted(unknown)}; tolerances are keyed by {sorted(known)}")
        return {**_default_tolerances(), **v}

    def ship_outputs_limit_bytes(self) -> int:
        """Bytes of one trial's outputs above which they are compared in the worker (``ship_outputs_max_mb``).

        The default follows where comparing is cheaper. On an H100, shipping and comparing on the host took a
        256 MB output's correctness stage (KernelBench L2-40) 6.7 s and a 64 MB one's (L1-1) 2.7 s; compared on the
        GPU they took 0.4 s and 0.2 s. On a CPU the worker's comparison is host work that ships nothing, and it was
        the slower one (11 s against 2-3 s for 64 MB outputs on 2 cores), so only outputs too large to ship go there.
        """
        mb = self.ship_outputs_max_mb
        if mb is None:
            mb = 32.0 if self.backend == "cuda" else 256.0
        return int(mb * 2**20)

    @model_validator(mode="after")
    def _arch_form(self) -> SandboxConfig:
        if self.arch is not None and not all(
            part.replace(".", "").replace("+PTX", "").isdigit() for part in self.arch.replace(";", " ").split()
        ):
            raise ValueError(f"arch: {self.arch!r} is not a TORCH_CUDA_ARCH_LIST value such as '9.0' or '8.0;9.0'")
        return self
