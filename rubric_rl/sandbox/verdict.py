"""The Verdict: what the sandbox concluded about one candidate.

It is the one record every later stage reads (rule reward, judge, Verifier feedback, reports); nothing
downstream re-runs the candidate. It is returned for every candidate and never raised. The schema is
documented field by field here and summarised in the README.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

Status = Literal["correct", "incorrect", "compile_error", "runtime_error", "timeout", "hack"]
FindingSource = Literal["static", "native", "runtime", "protocol", "kernels", "build"]

SCHEMA_VERSION = 2  # 2: host probe, timing cores and the worker's own stage clock under `diagnostics`


class Finding(BaseModel):
    """One anti-hacking rule that fired, with the evidence a person or a judge can check."""

    rule: str = Field(description="Stable rule id, e.g. 'static.torch_compute_call' or 'runtime.aten_fallback'.")
    severity: Literal["error", "warn"] = Field(description="error: the status is 'hack'; warn: recorded only.")
    source: FindingSource = Field(description="Which layer found it.")
    message: str = Field(description="What the rule saw, in one sentence.")
    line: int | None = Field(default=None, description="Line in the candidate program, where it has one.")
    evidence: str = Field(default="", description="The offending code, ops or values (bounded).")


class TrialResult(BaseModel):
    """One correctness trial: the candidate's outputs against the reference's on the same inputs."""

    index: int
    distribution: str = Field(description="'task' (get_inputs as written), 'signed', 'heavy_tailed' or 'timed'.")
    seed: int
    passed: bool
    skipped: str | None = Field(default=None, description="Why the trial was not run (e.g. reference not finite).")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched: int | None = Field(default=None, description="Elements outside tolerance (NaN counts).")
    numel: int | None = None
    error: str | None = Field(default=None, description="Shape/dtype/type mismatch or another reason it failed.")
    compared_in: Literal["evaluator", "worker"] = Field(
        default="evaluator",
        description="evaluator: the values were shipped and compared by the evaluator; worker: too large to ship, "
        "compared on the device in the worker and spot-checked by the evaluator.",
    )
    reference_recomputed: bool | None = Field(
        default=None,
        description="Trials compared in the worker: true when the reference output was poisoned before the "
        "candidate loaded and computed again after its trial, matching its fingerprint from before bit for bit; "
        "false when it stayed on the device meanwhile (the reference did not reproduce its bits).",
    )


class TimingStats(BaseModel):
    """Statistics of one model's timed calls, milliseconds."""

    n: int
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    p10_ms: float
    p90_ms: float

    @property
    def cv(self) -> float:
        return self.std_ms / self.mean_ms if self.mean_ms > 0 else 0.0


class Timings(BaseModel):
    """Eager, torch.compile and candidate timings, measured interleaved in one worker on the same inputs."""

    timer: Literal["host_sync", "host"] = Field(
        description="host_sync: host clock between device-wide synchronisations (GPU); host: host clock (CPU)."
    )
    candidate: TimingStats | None = None
    eager: TimingStats | None = None
    compile: TimingStats | None = None
    compile_mode: str | None = None
    compile_warmup_s: float | None = Field(default=None, description="torch.compile's first call, seconds.")
    compile_benchmarks: int | None = Field(
        default=None,
        description="Times torch.compile's first call had the device gate admit its GPU benchmarks (Inductor "
        "tuning its kernels: one admission for all the configs of a kernel); None: not reported.",
    )
    baseline_source: Literal["measured", "reused"] = Field(
        default="measured", description="reused: compile timing taken from the task's cached baseline."
    )
    eager_drift: float | None = Field(
        default=None, description="Eager median now over the cached baseline's eager median (reused baselines)."
    )
    rounds_ms: dict[str, list[float]] = Field(
        default_factory=dict,
        description="Each model timed in this run (candidate, eager, compile): its milliseconds round by round. Round "
        "r of every model ran back to back on the same draw (timing.paired_ratio pairs them).",
    )
    l2_flush: bool = False


class KernelLaunch(BaseModel):
    """A GPU kernel seen by the profiler during one candidate forward."""

    name: str
    owner: Literal["candidate", "library", "torch"] = Field(
        description="candidate: a __global__ of the candidate's sources; library: cuBLAS/cuDNN/CUTLASS...; "
        "torch: ATen's own kernels."
    )
    calls: int
    total_us: float


class ExtensionBuild(BaseModel):
    name: str
    key: str = Field(description="Content address in the build cache.")
    ok: bool
    cached: bool
    seconds: float = Field(description="Build time; for a cache hit, the time of the original build.")
    split_sources: bool = Field(default=False, description="The torch glue was moved out of the .cu (faster build).")
    dropped_flags: list[str] = Field(default_factory=list, description="Candidate flags the evaluator refused.")


class StageDurations(BaseModel):
    """Seconds per stage, measured by the evaluator (wall clock) unless said otherwise."""

    static_s: float = 0.0
    reference_s: float = Field(default=0.0, description="Worker setup and the reference's trials, to their arrival.")
    build_s: float = 0.0
    load_s: float = 0.0
    correctness_s: float = 0.0
    compile_s: float = Field(
        default=0.0,
        description="torch.compile's warm-up of the reference in this run, where no task baseline was reused "
        "(holds no gate).",
    )
    timing_s: float = Field(default=0.0, description="Sum of the timed calls themselves (device time, all models).")
    timing_wall_s: float = Field(default=0.0, description="The whole timing stage: inputs, warm-up, flushes, calls.")
    profile_s: float = Field(default=0.0, description="The kernel profile of one forward (cuda).")
    teardown_s: float = Field(default=0.0, description="Ending the worker: kill, reap, remove its directory.")
    device_wait_s: float = Field(
        default=0.0, description="Time waiting for the shared device or for the task's baseline (executors)."
    )
    total_s: float = 0.0


class Diagnostics(BaseModel):
    """How the evaluation went on this host: for a person reading a surprising number, never for rewards."""

    timing_cores: list[int] | None = Field(
        default=None,
        description="The CPUs the worker could run on while it timed, as it saw them (reserved timing cores when the "
        "executor reserves them; None: not reported).",
    )
    host_launch_us: float | None = Field(
        default=None,
        description="Microseconds per tiny op dispatched to the device where the rounds ran, mean of a probe before "
        "and after them (measure.timing.host_probe): a launch-bound program's times follow it.",
    )
    host_python_us: float | None = Field(
        default=None, description="Microseconds per step of a fixed pure-Python loop there, the same way."
    )
    worker_stages: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds the worker measured inside its stages, its waits for the evaluator apart: setup_s "
        "(device init), reference_model_s, reference_trials_s, load_preamble_s, candidate_import_s, model_init_s, "
        "correctness_trials_s, timing_rounds_s, timing_ship_s, profile_s, evaluator_wait_s, start_wait_s.",
    )
    longest_silence_s: dict[str, float] = Field(
        default_factory=dict,
        description="Per stage (setup, reference, load, correctness, compile, timing, profile), the longest the "
        "worker went without a message, our builds and gate waits apart: what a stage's limit bounds (limits."
        "stage_timeout_factor, stage_timeout_floor_s). A correct candidate's are the evidence for the floor.",
    )


def _from_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 record in schema 2's layout: its host probe, timing cores and worker clock moved under
    ``diagnostics`` (every other field is where it was; a retired one, such as ``timings.min_timing_s``, is
    dropped)."""
    data = dict(data)
    timings = dict(data.get("timings") or {})
    durations = dict(data.get("durations") or {})
    diagnostics = {
        "timing_cores": timings.pop("cpu_cores", None),
        "host_launch_us": timings.pop("host_launch_us", None),
        "host_python_us": timings.pop("host_python_us", None),
        "worker_stages": durations.pop("worker", None) or {},
    }
    timings.pop("min_timing_s", None)
    if data.get("timings") is not None:
        data["timings"] = timings
    if data.get("durations") is not None:
        data["durations"] = durations
    data["diagnostics"] = diagnostics
    data["schema_version"] = SCHEMA_VERSION
    return data


class Environment(BaseModel):
    backend: str
    torch: str
    python: str
    device: str
    arch: str | None = None
    cuda: str | None = None
    host: str
    rubric_rl: str


class Verdict(BaseModel):
    """What the sandbox concluded about one candidate. Returned for every candidate; never raised."""

    schema_version: int = SCHEMA_VERSION
    status: Status
    task_id: str | None = None
    candidate_sha256: str
    errors: list[str] = Field(default_factory=list, description="Digested, bounded messages, most important first.")
    compile_log: str | None = Field(default=None, description="Digest of the compiler's errors (compile_error).")
    findings: list[Finding] = Field(default_factory=list)
    trials: list[TrialResult] = Field(default_factory=list)
    timings: Timings | None = None
    speedup_eager: float | None = Field(default=None, description="Eager median / candidate median (correct only).")
    speedup_compile: float | None = Field(
        default=None,
        description="Compile median / candidate median. With a reused baseline the compile median is scaled by "
        "eager_drift: the baseline's compile/eager ratio times this run's eager/candidate ratio.",
    )
    kernels: list[KernelLaunch] = Field(default_factory=list)
    own_kernel_time_share: float | None = Field(
        default=None, description="Share of the forward's GPU kernel time in the candidate's own kernels."
    )
    aten_ops: dict[str, int] = Field(
        default_factory=dict, description="ATen ops the candidate's forward caused (one guarded call), with counts."
    )
    builds: list[ExtensionBuild] = Field(default_factory=list)
    task_flags: list[str] = Field(
        default_factory=list, description="Properties of the task, e.g. 'degenerate: zeros pass the tolerance'."
    )
    reference_reused: bool = Field(
        default=False, description="The reference outputs came from an earlier evaluation of the same task."
    )
    infra_error: str | None = Field(
        default=None,
        description="Set when the evaluator, not the candidate, failed (lost GPU, missing compiler). The status is "
        "then 'runtime_error' and rewards must mask the sample rather than score it.",
    )
    durations: StageDurations = Field(default_factory=StageDurations)
    environment: Environment | None = None
    diagnostics: Diagnostics = Field(default_factory=Diagnostics)

    @model_validator(mode="before")
    @classmethod
    def _read_older_schemas(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema_version", SCHEMA_VERSION) < 2:  # records always carry it
            return _from_schema_1(data)
        return data

    @property
    def hack_rules(self) -> list[str]:
        return [f.rule for f in self.findings if f.severity == "error"]
