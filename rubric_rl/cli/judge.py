"""``rubric-rl judge``: one candidate's rubric scores."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rubric_rl.cli.common import JsonFlag, fail, read_text, read_yaml_mapping, show_record

if TYPE_CHECKING:
    from pydantic import ValidationError

    from rubric_rl.judge import Judge, JudgeRequest, Judgment
    from rubric_rl.sandbox.verdict import Verdict


def judge(
    reference: Annotated[Path, typer.Argument(help="Reference program: Model, get_inputs, get_init_inputs.")],
    candidate: Annotated[Path, typer.Argument(help="Candidate program to judge (ModelNew).")],
    rubric: Annotated[
        str | None, typer.Option(help="Rubric file or bundled name, e.g. judges/stitchcuda.yaml (the default).")
    ] = None,
    skill: Annotated[str, typer.Option(help="Skill the candidate answered: generate, refine, or a card path.")] = (
        "generate"
    ),
    feedback: Annotated[Path | None, typer.Option(help="Feedback the candidate answers (refine).")] = None,
    previous: Annotated[Path | None, typer.Option(help="The program that was refined (refine).")] = None,
    verdict: Annotated[Path | None, typer.Option(help="The candidate's Verdict JSON (rubric-rl verify --out).")] = None,
    backend: Annotated[str | None, typer.Option(help="cuda or cpu (default: the Verdict's, else cuda).")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint (default: $RUBRIC_RL_JUDGE_BASE_URL).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Judge model name (default: $RUBRIC_RL_JUDGE_MODEL).")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Use the offline heuristic judge, not an LLM.")] = False,
    samples: Annotated[int | None, typer.Option(help="Judge samples to average (default 1).")] = None,
    temperature: Annotated[float | None, typer.Option(help="Judge sampling temperature (default 0).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="YAML file of JudgeConfig fields.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither reuse nor store cached judgments.")] = False,
    out: Annotated[Path | None, typer.Option(help="Also write the Judgment JSON here.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Score one candidate against a rubric (LLM judge, or the offline heuristic when no endpoint is set)."""
    import asyncio

    if offline and base_url is not None:
        raise fail("--offline and --base-url exclude each other")
    if backend not in (None, "cuda", "cpu"):
        raise fail(f"--backend must be cuda or cpu, not {backend!r}")
    ref_text, cand_text = read_text(reference, "reference"), read_text(candidate, "candidate")
    feedback_text = read_text(feedback, "feedback") if feedback else None
    previous_text = read_text(previous, "previous program") if previous else None
    verdict_obj = _read_verdict(verdict) if verdict is not None else None
    data = read_yaml_mapping(config, "JudgeConfig") if config is not None else {}
    overrides = {
        "rubric": rubric,
        "base_url": base_url,
        "model": model,
        "samples": samples,
        "temperature": temperature,
        "offline": offline or None,
        "cache": False if no_cache else None,
    }
    data.update({k: v for k, v in overrides.items() if v is not None})
    judge_, request = _judge_and_request(
        data,
        skill,
        ref_text,
        cand_text,
        feedback=feedback_text,
        previous=previous_text,
        verdict=verdict_obj,
        backend=backend,
        task_id=reference.stem,
    )
    judgment = asyncio.run(_judge_once(judge_, request))

    def panel():
        from rubric_rl.judge.report import judgment_panel

        return judgment_panel(judgment, title=f"{reference.name} <- {candidate.name}")

    show_record(judgment.model_dump_json(indent=2), out, as_json, panel)
    if judgment.judge_failed:
        typer.secho(
            f"warning: the judge failed ({judgment.failure}); neutral fallback scores", err=True, fg=typer.colors.YELLOW
        )


def _field_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"field {'.'.join(str(x) for x in err['loc']) or '(top level)'}: {err['msg']}"


def _read_verdict(path: Path) -> Verdict:
    """The candidate's Verdict JSON, as ``rubric-rl verify --out`` wrote it."""
    from pydantic import ValidationError

    from rubric_rl.sandbox.verdict import Verdict

    try:
        return Verdict.model_validate_json(read_text(path, "verdict"))
    except ValidationError as e:
        raise fail(f"{path}: not a Verdict: {_field_error(e)}") from None


def _judge_and_request(
    data: dict[str, Any],
    skill: str,
    reference_text: str,
    candidate_text: str,
    *,
    feedback: str | None,
    previous: str | None,
    verdict: Verdict | None,
    backend: str | None,
    task_id: str,
) -> tuple[Judge, JudgeRequest]:
    """The judge that ``data`` (JudgeConfig fields) configures and the request it scores; a bad field, rubric or
    skill exits 2 with a message that names it."""
    from pydantic import ValidationError

    from rubric_rl.judge import JudgeConfig, RubricError, build_request, make_judge
    from rubric_rl.skills import SkillCardError

    try:
        cfg = JudgeConfig.model_validate(data).resolved()
        request = build_request(
            skill,
            reference_text,
            candidate_text,
            feedback=feedback,
            previous=previous,
            verdict=verdict,
            backend=backend,  # type: ignore[arg-type]
            task_id=task_id,
        )
        judge_ = make_judge(cfg)
        judge_.rubric.check_skill(request.skill)
    except ValidationError as e:
        raise fail(f"{e.title} {_field_error(e)}") from None
    except (RubricError, SkillCardError, FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from None
    return judge_, request


async def _judge_once(judge_: Judge, request: JudgeRequest) -> Judgment:
    try:
        return await judge_.judge(request)
    finally:
        await judge_.aclose()
