"""Skill cards: the prompt templates and output contracts of the atomic skills (``skills/*.yaml``).

A card is content, not code: users edit or add cards and point the system at them by path or bundled name.
Templates use ``$name`` placeholders (``string.Template``); a placeholder the card does not declare fails at
load time, naming the field.
"""

from __future__ import annotations

import string
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from rubric_rl.resources import content_dir, resolve_content

SkillInput = Literal["reference", "candidate", "feedback"]
Backend = Literal["cuda", "cpu"]


class SkillContract(BaseModel):
    """What a response must satisfy; read by the parser and by the judge's skill-compliance dimension."""

    defines: str = Field(default="ModelNew", description="Class the program must define.")
    requires_kernel: bool = Field(default=True, description="The program must compile its own kernel.")
    from_scratch: bool = Field(description="generate: True; refine: False (must act on the given feedback).")


class SkillCard(BaseModel):
    name: str
    version: int = Field(ge=1)
    description: str
    inputs: list[SkillInput] = Field(min_length=1, description="Values the templates may use besides backend text.")
    system: str
    user: str
    backends: dict[Backend, str] = Field(
        description="Backend-specific instructions, filled into $backend_instructions."
    )
    contract: SkillContract

    @model_validator(mode="after")
    def _placeholders_declared(self) -> SkillCard:
        allowed = set(self.inputs) | {"backend_instructions"}
        for field in ("system", "user"):
            template = string.Template(getattr(self, field))
            for name in template.get_identifiers():
                if name not in allowed:
                    raise ValueError(f"{field}: placeholder ${name} is not one of {sorted(allowed)}")
        if "reference" not in self.inputs:
            raise ValueError("inputs: every skill sees the reference")
        return self

    def render(
        self,
        *,
        reference: str,
        backend: Backend,
        candidate: str | None = None,
        feedback: str | None = None,
    ) -> list[dict[str, str]]:
        """Chat messages (system, user) for one task."""
        values = {"reference": reference.strip(), "backend_instructions": self.backends[backend].strip()}
        for name, value in (("candidate", candidate), ("feedback", feedback)):
            if name in self.inputs:
                if value is None:
                    raise ValueError(f"skill {self.name!r} needs {name}")
                values[name] = value.strip()
        return [
            {"role": "system", "content": string.Template(self.system).substitute(values).strip()},
            {"role": "user", "content": string.Template(self.user).substitute(values).strip()},
        ]


class SkillCardError(ValueError):
    pass


@lru_cache(maxsize=32)
def _load(path: Path) -> SkillCard:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise SkillCardError(f"{path}: not valid YAML: {e}") from e
    try:
        return SkillCard.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise SkillCardError(f"{path}: field {loc}: {first['msg']}") from e


def load_skill(name_or_path: str | Path) -> SkillCard:
    """A skill card by path, or by bundled name ('generate', 'refine')."""
    return _load(resolve_content(name_or_path, "skills").resolve())


def bundled_skills() -> list[Path]:
    return sorted(content_dir("skills").glob("*.yaml"))
