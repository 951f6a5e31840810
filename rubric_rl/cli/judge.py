"""``rubric-rl judge``: one candidate's rubric scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rubric_rl.cli.common import JsonFlag, console, fail, read_text


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

    import yaml
    from pydantic import ValidationError

    from rubric_rl.judge import JudgeConfig, RubricError, build_request, make_judge
    from rubric_rl.sandbox.verdict import Verdict
    from rubric_rl.skills import SkillCardError

    def field_error(e: ValidationError) -> str:
        err = e.errors()[0]
        return f"field {'.'.join(str(x) for x in err['loc']) or '(top level)'}: {err['msg']}"

    if offline and base_url is not None:
        raise fail("--offline and --base-url exclude each other")
    if backend not in (None, "cuda", "cpu"):
        raise fail(f"--backend must be cuda or cpu, not {backend!r}")
    ref_text, cand_text = read_text(reference, "reference"), read_text(candidate, "candidate")
    feedback_text = read_text(feedback, "feedback") if feedback else None
    previous_text = read_text(previous, "previous program") if previous else None
    verdict_obj = None
    if verdict is not None:
        try:
            verdict_obj = Verdict.model_validate_json(read_text(verdict, "verdict"))
        except ValidationError as e:
            raise fail(f"{verdict}: not a Verdict: {field_error(e)}") from None
    data: dict[str, Any] = {}
    if config is not None:
        try:
            data = yaml.safe_load(read_text(config, "config")) or {}
        except yaml.YAMLError as e:
            raise fail(f"{config}: not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise fail(f"{config}: expected a mapping of JudgeConfig fields")
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
    try:
        cfg = JudgeConfig.model_validate(data).resolved()
        request = build_request(
            skill,
            ref_text,
            cand_text,
            feedback=feedback_text,
            previous=previous_text,
            verdict=verdict_obj,
            backend=backend,  # type: ignore[arg-type]
            task_id=reference.stem,
        )
        judge_ = make_judge(cfg)
        judge_.rubric.check_skill(request.skill)
    except ValidationError as e:
        raise fail(f"{e.title} {field_error(e)}") from None
    except (RubricError, SkillCardError, FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from None

    async def run():
        try:
            return await judge_.judge(request)
        finally:
            await judge_.aclose()

    judgment = asyncio.run(run())
    text = judgment.model_dump_json(indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    if as_json:
        typer.echo(text)
    else:
        from rubric_rl.judge.report import judgment_panel

        console().print(judgment_panel(judgment, title=f"{reference.name} <- {candidate.name}"))
    if judgment.judge_failed:
        typer.secho(
            f"warning: the judge failed ({judgment.failure}); neutral fallback scores", err=True, fg=typer.colors.YELLOW
        )
