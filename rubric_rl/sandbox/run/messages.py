"""What the evaluator and its worker say to each other: one pydantic model per message kind, both directions.

``protocol`` frames a message (a kind, a JSON body, raw tensors); this module says what each body holds. Every
body is validated where it arrives: the evaluator validates what the worker sends (``parse_body(msg,
FROM_WORKER)``), the worker what the evaluator sends (``TO_WORKER``). A body that does not fit its model, or a
kind the receiver does not expect, is a ``ProtocolError`` naming the message and the field; the evaluator turns
it into a ``runtime_error`` Verdict like any other garbage on the pipe. Tensors travel beside the body, as the
framing lays them out; they are checked by ``protocol.unpack_tensors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict

from rubric_rl.sandbox.build.extension import ExtensionSpec
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.run.protocol import Channel, Message, ProtocolError
from rubric_rl.sandbox.verdict import TrialResult

ToWorker = Literal["setup", "load", "built", "go", "sample", "stop", "compile", "time", "profile"]
FromWorker = Literal[
    "ready",
    "reference",
    "build",
    "loaded",
    "next_trial",
    "sample_request",
    "trial",
    "trials_done",
    "device_wanted",
    "device_released",
    "compiled",
    "warm",
    "timed",
    "timing",
    "kernels",
    "done",
    "error",
    "captured",
]
Phases = dict[str, float]  # seconds of the worker's own phases, by name (diagnostic)


class Body(BaseModel):
    """A message body; ``kind`` is the message's name on the wire."""

    model_config = ConfigDict(extra="forbid")
    kind: ClassVar[str]


# ---- records inside bodies ------------------------------------------------------------------------------------
class TensorInfo(TypedDict):
    """An output that is a tensor, as ``measure.inputs.describe`` records it."""

    kind: Literal["tensor"]
    type: str
    plain: bool
    shape: list[int]
    dtype: str
    device: str
    layout: str


class ScalarInfo(TypedDict):
    kind: Literal["scalar"]
    value: bool | int | float | None


class OtherInfo(TypedDict):
    kind: Literal["other"]
    type: str


OutputInfo = Annotated[TensorInfo | ScalarInfo | OtherInfo, Field(discriminator="kind")]


class WorkerEnv(BaseModel):
    """Where the worker runs (``DeviceBackend.describe`` and torch's version)."""

    model_config = ConfigDict(extra="forbid")
    torch: str
    device: str
    arch: str | None = None
    cuda: str | None = None


class ReferenceTrial(BaseModel):
    """One trial as the reference ran it, before the candidate loaded."""

    model_config = ConfigDict(extra="forbid")
    index: int = Field(ge=0)
    distribution: str
    seed: int
    finite: bool
    outputs: list[OutputInfo]
    mutates_inputs: bool
    on_device: bool = Field(description="Too large to ship: compared in the worker, spot-checked by the evaluator.")
    skipped: str | None = None
    recomputed: bool | None = Field(
        default=None, description="Kept trials: poisoned now and computed again after the candidate's trial."
    )


# ---- what the evaluator sends -----------------------------------------------------------------------------------
class Setup(Body):
    """The first message: what to run, and how."""

    kind: ClassVar[ToWorker] = "setup"
    config: SandboxConfig
    reference: str
    candidate: str
    mode: Literal["evaluate", "baseline", "capture"] = "evaluate"
    memory_fraction: float = Field(gt=0, le=1, description="The worker's share of the GPU's memory.")
    known_reference: list[ReferenceTrial] | None = Field(
        default=None,
        description="The reference's trial records from an earlier evaluation of this task (the evaluator holds "
        "its outputs): the trials' inputs are drawn again and the reference does not run them.",
    )
    sent_at: float | None = Field(
        default=None, description="The evaluator's monotonic clock when it sent this (the worker shares it)."
    )
    ncu: bool = Field(
        default=False,
        description="The worker runs under Nsight Compute: no timing; after its trials, on 'profile', one warm-up "
        "forward, then one forward inside cudaProfilerStart/Stop, and no torch profiler (its CUPTI use conflicts "
        "with ncu's).",
    )


class Load(Body):
    kind: ClassVar[ToWorker] = "load"


class Built(Body):
    """The answer to a build request."""

    kind: ClassVar[ToWorker] = "built"
    ok: bool
    library: str | None = None
    module_name: str | None = None


class Go(Body):
    """The device may be used: the next trial, or one of torch.compile's benchmarks."""

    kind: ClassVar[ToWorker] = "go"


class Sample(Body):
    """Positions for a spot check, drawn after the candidate's output exists."""

    kind: ClassVar[ToWorker] = "sample"
    seed: int
    k: int = Field(ge=0)


class Stop(Body):
    kind: ClassVar[ToWorker] = "stop"


class Compile(Body):
    """No task baseline to reuse: compile and warm up torch.compile of the reference here."""

    kind: ClassVar[ToWorker] = "compile"


class Time(Body):
    """The device is this worker's alone: run the timed rounds."""

    kind: ClassVar[ToWorker] = "time"


class Profile(Body):
    kind: ClassVar[ToWorker] = "profile"


# ---- what the worker sends ------------------------------------------------------------------------------------
class Ready(Body):
    kind: ClassVar[FromWorker] = "ready"
    env: WorkerEnv


class Reference(Body):
    """The reference's trials: their records (outputs beside them as tensors), or, for a reference the evaluator
    already knows, only that its inputs were drawn."""

    kind: ClassVar[FromWorker] = "reference"
    trials: list[ReferenceTrial] = Field(default_factory=list)
    kept_task_flags: list[str] = Field(default_factory=list)
    known: bool = False
    phases: Phases = Field(default_factory=dict)


class Build(Body):
    """A ``load_inline`` call of the candidate: the spec to build, or why it cannot be built."""

    kind: ClassVar[FromWorker] = "build"
    spec: ExtensionSpec | None = None
    spec_error: str | None = None


class LoadedExtension(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    module: str


class Loaded(Body):
    kind: ClassVar[FromWorker] = "loaded"
    phases: Phases = Field(default_factory=dict)
    load_s: float
    state_matched: int
    extensions: list[LoadedExtension] = Field(default_factory=list)
    integrity: list[str] = Field(default_factory=list)
    audit: list[str] = Field(default_factory=list)


class NextTrial(Body):
    kind: ClassVar[FromWorker] = "next_trial"


class SampleRequest(Body):
    kind: ClassVar[FromWorker] = "sample_request"
    index: int | None = None
    round: int | None = None


class Trial(Body):
    """One candidate trial: its outputs' records (values beside them as tensors) and what the guards saw."""

    kind: ClassVar[FromWorker] = "trial"
    index: int = Field(ge=0)
    outputs: list[OutputInfo]
    aliases_input: list[bool]
    aliases_parameter: list[bool]
    mutated_inputs: bool
    inputs_intact: bool | None = None
    ops: dict[str, int] = Field(default_factory=dict)
    downcasts: dict[str, int] = Field(default_factory=dict)
    guard_escaped: str | None = None
    device_result: TrialResult | None = Field(
        default=None, description="Compared in the worker (a kept reference): its result, to be spot-checked."
    )
    reference_intact: bool | None = None
    reference_resampled: bool = False


class TrialsDone(Body):
    kind: ClassVar[FromWorker] = "trials_done"
    phases: Phases = Field(default_factory=dict)
    integrity: list[str] = Field(default_factory=list)
    audit: list[str] = Field(default_factory=list)


class DeviceWanted(Body):
    """Before one of torch.compile's GPU benchmarks (``compile_gate``)."""

    kind: ClassVar[FromWorker] = "device_wanted"


class DeviceReleased(Body):
    kind: ClassVar[FromWorker] = "device_released"


class Compiled(Body):
    """torch.compile is warmed up beside the candidate; the worker waits for ``time``."""

    kind: ClassVar[FromWorker] = "compiled"


class Warm(Body):
    """A baseline's models are ready; the worker waits for ``time``."""

    kind: ClassVar[FromWorker] = "warm"


class Timed(Body):
    """The timed rounds are over: the device is free."""

    kind: ClassVar[FromWorker] = "timed"


Rounds = Annotated[list[float], Field(min_length=1)]


class RoundTimes(BaseModel):
    """Milliseconds of each timed round, per model (round r of every model ran back to back)."""

    model_config = ConfigDict(extra="forbid")
    eager: Rounds
    candidate: Rounds | None = None
    compile: Rounds | None = None

    def by_model(self) -> dict[str, list[float]]:
        models = (("candidate", self.candidate), ("eager", self.eager), ("compile", self.compile))
        return {k: v for k, v in models if v is not None}


class AdmittedInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    route: str
    admissions: int = Field(ge=0)


class CompileInfo(BaseModel):
    """torch.compile's warm-up in this worker (empty when it was not compiled here)."""

    model_config = ConfigDict(extra="forbid")
    warmup_s: float | None = None
    benchmarks: AdmittedInfo | None = None
    error: str | None = None

    def admitted_benchmarks(self) -> int | None:
        """How many GPU benchmarks the warm-up had admitted (None: its torch offered no route)."""
        if self.benchmarks is None or self.benchmarks.route == "none":
            return None
        return self.benchmarks.admissions


class CheckedRound(BaseModel):
    """A timed round whose outputs are checked: shipped beside the body, or compared in the worker."""

    model_config = ConfigDict(extra="forbid")
    round: int
    seed: int
    device_result: TrialResult | None = None


class HostProbe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    launch_us: float
    python_us: float


class Timing(Body):
    kind: ClassVar[FromWorker] = "timing"
    phases: Phases = Field(default_factory=dict)
    times_ms: RoundTimes
    compile: CompileInfo = Field(default_factory=CompileInfo)
    checked: list[CheckedRound] = Field(default_factory=list)
    cpu_cores: list[int] | None = None
    host_probe: HostProbe | None = None
    integrity: list[str] = Field(default_factory=list)
    audit: list[str] = Field(default_factory=list)


class ProfiledKernel(BaseModel):
    """One kernel (or copy, or fill) of the profiled forward, summed over its calls on one stream."""

    model_config = ConfigDict(extra="forbid")
    name: str
    stream: int
    calls: int
    total_us: float
    kind: str


class Kernels(Body):
    kind: ClassVar[FromWorker] = "kernels"
    kernels: list[ProfiledKernel] = Field(default_factory=list)
    current_stream: int = -1
    error: str | None = None


class Done(Body):
    kind: ClassVar[FromWorker] = "done"
    phases: Phases = Field(default_factory=dict)
    audit: list[str] = Field(default_factory=list)


class Error(Body):
    """The worker's last message when something raised: the candidate's code, the task's, or its own setup."""

    kind: ClassVar[FromWorker] = "error"
    stage: str
    message: str
    task_error: bool = Field(default=False, description="The reference failed: not the candidate's fault.")
    infra: bool = Field(default=False, description="The worker's own setup failed.")
    audit: list[str] = Field(default_factory=list)


class Captured(Body):
    """Capture mode's one message: the candidate's load_inline calls."""

    kind: ClassVar[FromWorker] = "captured"
    specs: list[ExtensionSpec] = Field(default_factory=list)
    error: str | None = None


def _by_kind(*models: type[Body]) -> dict[str, type[Body]]:
    return {m.kind: m for m in models}


TO_WORKER: Mapping[str, type[Body]] = _by_kind(Setup, Load, Built, Go, Sample, Stop, Compile, Time, Profile)
FROM_WORKER: Mapping[str, type[Body]] = _by_kind(
    Ready,
    Reference,
    Build,
    Loaded,
    NextTrial,
    SampleRequest,
    Trial,
    TrialsDone,
    DeviceWanted,
    DeviceReleased,
    Compiled,
    Warm,
    Timed,
    Timing,
    Kernels,
    Done,
    Error,
    Captured,
)


def parse_body(msg: Message, expected: Mapping[str, type[Body]]) -> Body:
    """The body of ``msg`` as the model of its kind; ``ProtocolError`` naming the message and the field if it is not
    one of the ``expected`` kinds or does not fit its model."""
    model = expected.get(msg.type)
    if model is None:
        raise ProtocolError(f"unexpected message {msg.type[:40]!r}")
    try:
        return model.model_validate(msg.body)
    except ValidationError as e:
        raise ProtocolError(f"message {msg.type!r}: {_first_problem(e)}") from None


def _first_problem(error: ValidationError) -> str:
    problems = error.errors(include_url=False, include_input=False)
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"field {where!r}: {first['msg']}{more}"


def send(chan: Channel, body: Body, tensors: list[Any] | None = None) -> None:
    """Send ``body`` as a message of its kind, ``tensors`` (nested lists of tensors and None) beside it."""
    chan.send(body.kind, body.model_dump(mode="json"), tensors=tensors)
