"""A candidate's extension built the evaluator's way: the rewritten (split) build through the cache, and, should
that fail, the candidate's own sources as written (the rewrite may change how fast a candidate builds, never its
verdict)."""

from __future__ import annotations

from typing import Literal

from rubric_rl.sandbox.build.builder import Builder, BuildOutcome
from rubric_rl.sandbox.build.extension import ExtensionSpec, PreparedBuild, prepare_build
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.verdict import ExtensionBuild


def as_written(spec: ExtensionSpec, config: SandboxConfig, arch: str | None) -> PreparedBuild:
    """The build of the candidate's own sources (no split): what native checks read, so lines map back."""
    return prepare_build(spec, config, arch, split_sources=False)


def build_extension(
    builder: Builder,
    config: SandboxConfig,
    spec: ExtensionSpec,
    prepared: PreparedBuild,
    arch: str | None,
    candidate: str,
    mode: Literal["full", "objects"] = "full",
) -> tuple[BuildOutcome, ExtensionBuild]:
    """Build ``prepared`` through the cache; a split build that fails is rebuilt from the sources as written."""
    outcome = builder.build(prepared, candidate=candidate, mode=mode)
    if not outcome.ok and prepared.split_sources and not outcome.infra_error:
        prepared = as_written(spec, config, arch)
        outcome = builder.build(prepared, candidate=candidate, mode=mode)
    record = ExtensionBuild(
        name=spec.name,
        key=outcome.key,
        ok=outcome.ok,
        cached=outcome.cached,
        seconds=round(outcome.seconds, 3),
        split_sources=prepared.split_sources,
        dropped_flags=prepared.dropped_flags,
    )
    return outcome, record
