"""Rubrics: the dimensions a judge scores, their levels and weights, and the gates that override the total.

A rubric is content (``judges/*.yaml``), not code: swapping one is a config change. It is validated on load;
an error names the file and the field (``dimensions.2.weight``). Its ``content_hash`` covers everything that
changes a score, so caches and reports can tell two edits of the same ``name``/``version`` apart.

Scoring, shared by every judge: each dimension's score (an average over samples, on the dimension's level
range) is normalised to [0, 1]; the raw total is the weighted mean of those; a fired gate then zeroes or caps
it. Weights need not sum to 1 (they are normalised); a weight of 0 reports a dimension without scoring it.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from rubric_rl.resources import content_dir, resolve_content
from rubric_rl.sandbox.verdict import Status

HeuristicName = Literal["anti_hacking", "cuda_engineering", "operator_coverage", "skill_compliance"]
HEURISTICS: tuple[str, ...] = ("anti_hacking", "cuda_engineering", "operator_coverage", "skill_compliance")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _identifier(v: str) -> str:
    if not _NAME.match(v):
        raise ValueError(f"{v!r} is not an identifier of lowercase letters, digits and underscores")
    return v


Identifier = Annotated[str, AfterValidator(_identifier)]  # a dimension's or a gate's key in the judge's JSON answer


class RubricError(ValueError):
    """A rubric or judge prompt file that cannot be used; the message names the file and the field."""


class Dimension(BaseModel):
    """One scored aspect of a candidate."""

    model_config = ConfigDict(extra="forbid")

    name: Identifier = Field(description="Identifier used in the judge's JSON answer (lowercase, digits, underscores).")
    title: str = Field(default="", description="Human-readable name; defaults to the name.")
    description: str = Field(min_length=1, description="What the dimension measures, shown to the judge verbatim.")
    weight: float = Field(ge=0.0, le=1e6, description="Relative weight in the total (normalised by the sum).")
    levels: dict[int, str] = Field(
        description="Score -> what that level means; keys are consecutive integers, lowest is worst."
    )
    heuristic: HeuristicName | None = Field(
        default=None,
        description="Which offline heuristic scores this dimension; defaults to the name when it is one of "
        f"{list(HEURISTICS)}. The offline judge refuses a rubric with a dimension it cannot score.",
    )

    @field_validator("levels")
    @classmethod
    def _consecutive(cls, v: dict[int, str]) -> dict[int, str]:
        keys = sorted(v)
        if len(keys) < 2:
            raise ValueError("needs at least two levels")
        if keys != list(range(keys[0], keys[0] + len(keys))):
            raise ValueError(f"level scores must be consecutive integers, got {keys}")
        if any(not text.strip() for text in v.values()):
            raise ValueError("every level needs a description")
        return dict(sorted(v.items()))

    @model_validator(mode="after")
    def _defaults(self) -> Dimension:
        if not self.title:
            self.title = self.name.replace("_", " ")
        if self.heuristic is None and self.name in HEURISTICS:
            self.heuristic = self.name  # type: ignore[assignment]
        return self

    @property
    def min_score(self) -> int:
        return next(iter(self.levels))

    @property
    def max_score(self) -> int:
        return next(reversed(self.levels))

    @property
    def neutral_score(self) -> float:
        """The middle of the range: the recorded fallback when a judge fails."""
        return (self.min_score + self.max_score) / 2

    def normalise(self, score: float) -> float:
        return (score - self.min_score) / (self.max_score - self.min_score)


class Gate(BaseModel):
    """A condition that overrides the weighted total (e.g. major hacking zeroes the reward)."""

    model_config = ConfigDict(extra="forbid")

    name: Identifier = Field(description="Identifier; also the flag's key in the judge's JSON answer.")
    description: str = Field(min_length=1, description="When the gate applies; shown to the judge for flags.")
    effect: Literal["zero", "cap"] = Field(description="zero: the total becomes 0; cap: the total is at most `cap`.")
    cap: float | None = Field(default=None, ge=0.0, le=1.0, description="Upper bound of the total (effect cap).")
    judge_flag: bool = Field(
        default=False, description="The judge answers a boolean flag of this name; the gate fires on the flag."
    )
    quorum: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="Share of the successful samples that must raise the flag for the gate to fire.",
    )
    verdict_status: list[Status] = Field(
        default_factory=list, description="Fires when the sandbox Verdict has one of these statuses."
    )
    verdict_rules: list[str] = Field(
        default_factory=list,
        description="Fires when a Verdict finding (any severity) matches one of these rule ids (fnmatch globs).",
    )
    own_kernel_share_below: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Fires when the Verdict's share of GPU time in the candidate's own kernels is below this.",
    )
    score_at_most: dict[str, int] = Field(
        default_factory=dict, description="Dimension -> score: fires when that dimension's score is at most it."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Gate:
        if self.effect == "cap" and self.cap is None:
            raise ValueError("effect 'cap' needs a value in `cap`")
        if self.effect == "zero" and self.cap is not None:
            raise ValueError("`cap` is only meaningful with effect 'cap'")
        triggers = (self.judge_flag, self.verdict_status, self.verdict_rules, self.score_at_most)
        if not any(triggers) and self.own_kernel_share_below is None:
            raise ValueError(
                "a gate needs a trigger: judge_flag, verdict_status, verdict_rules, own_kernel_share_below or "
                "score_at_most"
            )
        return self


class Rubric(BaseModel):
    """A complete rubric file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Rubric name, recorded in every judgment.")
    version: int = Field(ge=1, description="Bumped when a change should invalidate cached judgments.")
    description: str = Field(min_length=1, description="What the rubric is for.")
    skills: list[str] = Field(
        default_factory=lambda: ["generate", "refine"],
        min_length=1,
        description="Skill cards this rubric may judge; a request for another skill is refused.",
    )
    guidance: str = Field(default="", description="Extra instructions for the judge, shown after the dimensions.")
    prompt: str = Field(
        default="prompts/default.yaml",
        description="Judge prompt template: a path relative to the rubric file, or a bundled judges/ entry.",
    )
    dimensions: list[Dimension] = Field(min_length=1, description="Scored dimensions, in answer order.")
    gates: list[Gate] = Field(default_factory=list, description="Overrides of the total, applied in order.")
    _source_dir: Path | None = PrivateAttr(default=None)

    @property
    def source_dir(self) -> Path | None:
        """Folder of the file the rubric was loaded from (None when built in code)."""
        return self._source_dir

    @model_validator(mode="after")
    def _cross_checks(self) -> Rubric:
        seen: set[str] = set()
        for i, d in enumerate(self.dimensions):
            if d.name in seen:
                raise ValueError(f"dimensions.{i}.name: duplicate dimension name {d.name!r}")
            seen.add(d.name)
        if sum(d.weight for d in self.dimensions) <= 0:
            raise ValueError("dimensions.*.weight: at least one dimension needs a positive weight")
        gate_names: set[str] = set()
        for i, g in enumerate(self.gates):
            if g.name in gate_names or g.name in seen:
                raise ValueError(f"gates.{i}.name: {g.name!r} is already used by a gate or a dimension")
            gate_names.add(g.name)
            for dim, score in g.score_at_most.items():
                if dim not in seen:
                    raise ValueError(f"gates.{i}.score_at_most: unknown dimension {dim!r} (have {sorted(seen)})")
                d = self.dimension(dim)
                if not d.min_score <= score <= d.max_score:
                    raise ValueError(
                        f"gates.{i}.score_at_most.{dim}: {score} is outside the levels {d.min_score}..{d.max_score}"
                    )
        return self

    def dimension(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def flag_gates(self) -> list[Gate]:
        return [g for g in self.gates if g.judge_flag]

    @property
    def content_hash(self) -> str:
        """sha256 of the validated content (formatting and comments of the file do not count)."""
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()

    def check_skill(self, skill: str) -> None:
        if skill not in self.skills:
            raise RubricError(f"rubric {self.name!r} judges skills {self.skills}, not {skill!r} (field skills)")


class PromptTemplate(BaseModel):
    """The judge's prompt (``judges/prompts/*.yaml``): ``string.Template`` texts with declared placeholders."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Template name, recorded in the judge identity.")
    version: int = Field(ge=1, description="Template version, recorded in the judge identity.")
    system: str = Field(min_length=1, description="System message: the judge's role, the rubric, the answer format.")
    user: str = Field(min_length=1, description="User message: the skill, the untrusted data blocks, the evidence.")
    answer: str = Field(min_length=1, description="How to answer; $skeleton is the JSON shape built from the rubric.")
    repair: str = Field(min_length=1, description="Follow-up sent when an answer cannot be parsed ($reason).")

    @model_validator(mode="after")
    def _placeholders(self) -> PromptTemplate:
        allowed = {
            "system": {
                "rubric_name",
                "rubric_version",
                "rubric_description",
                "dimensions",
                "gates",
                "guidance",
                "answer_format",
            },
            "user": {"nonce", "skill", "skill_description", "contract", "instructions", "blocks", "evidence"},
            "answer": {"skeleton"},
            "repair": {"reason", "answer_format"},
        }
        for field, names in allowed.items():
            try:
                used = string.Template(getattr(self, field)).get_identifiers()
            except ValueError as e:
                raise ValueError(f"{field}: {e}") from e
            unknown = sorted(set(used) - names)
            if unknown:
                raise ValueError(f"{field}: placeholder(s) {unknown} are not among {sorted(names)}")
        return self

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def _validation_message(path: Path, e: ValidationError) -> str:
    first = e.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
    msg = str(first["msg"]).removeprefix("Value error, ")
    return f"{path}: field {loc}: {msg}"


def _read_yaml(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise RubricError(f"{path}: not valid YAML: {e}") from e


def load_prompt(rubric: Rubric) -> PromptTemplate:
    """The prompt template a rubric names: beside the rubric's file first, else a bundled judges/ entry."""
    local = rubric.source_dir / rubric.prompt if rubric.source_dir is not None else None
    try:
        prompt_path = local if local is not None and local.exists() else resolve_content(rubric.prompt, "judges")
    except FileNotFoundError as e:
        raise RubricError(f"rubric {rubric.name!r}: field prompt: {e}") from e
    return _load_prompt(prompt_path.resolve(), prompt_path.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _load_prompt(path: Path, mtime_ns: int) -> PromptTemplate:
    try:
        return PromptTemplate.model_validate(_read_yaml(path))
    except ValidationError as e:
        raise RubricError(_validation_message(path, e)) from e


@lru_cache(maxsize=64)
def _load_rubric(path: Path, mtime_ns: int) -> tuple[Rubric, PromptTemplate]:
    try:
        rubric = Rubric.model_validate(_read_yaml(path))
    except ValidationError as e:
        raise RubricError(_validation_message(path, e)) from e
    rubric._source_dir = path.parent
    return rubric, load_prompt(rubric)


def load_rubric_and_prompt(path_or_name: str | Path) -> tuple[Rubric, PromptTemplate]:
    """A rubric and its prompt template, by path or bundled name ('stitchcuda', 'judges/stitchcuda.yaml')."""
    try:
        path = resolve_content(path_or_name, "judges").resolve()
    except FileNotFoundError as e:
        raise RubricError(str(e)) from e
    return _load_rubric(path, path.stat().st_mtime_ns)


def load_rubric(path_or_name: str | Path) -> Rubric:
    """A validated rubric, by path or bundled name."""
    return load_rubric_and_prompt(path_or_name)[0]


def bundled_rubrics() -> list[Path]:
    return sorted(content_dir("judges").glob("*.yaml"))
