"""``rubric-rl skills``: the skill cards, their prompts, and response parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rubric_rl.cli.common import JsonFlag, fail, read_text

skills_app = typer.Typer(no_args_is_help=True, help="Skill cards (generate, refine): list, render prompts, parse.")


@skills_app.command("list")
def skills_list(as_json: JsonFlag = False) -> None:
    """The bundled skill cards."""
    from rubric_rl.skills import bundled_skills, load_skill

    cards = [load_skill(p) for p in bundled_skills()]
    if as_json:
        for c in cards:
            typer.echo(
                json.dumps({"name": c.name, "version": c.version, "description": c.description, "inputs": c.inputs})
            )
        return
    for c in cards:
        typer.echo(f"{c.name} (v{c.version}): {c.description}  [inputs: {', '.join(c.inputs)}]")


@skills_app.command("render")
def skills_render(
    skill: Annotated[str, typer.Option(help="Skill card: a bundled name (generate, refine) or a path.")],
    reference: Annotated[Path, typer.Option(help="Reference program (.py).")],
    backend: Annotated[str, typer.Option(help="cuda or cpu.")] = "cuda",
    candidate: Annotated[Path | None, typer.Option(help="Current program (refine).")] = None,
    feedback: Annotated[Path | None, typer.Option(help="Feedback text (refine).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the chat messages a skill card makes for one reference program."""
    from rubric_rl.skills import SkillCardError, load_skill

    try:
        card = load_skill(skill)
        messages = card.render(
            reference=read_text(reference, "reference"),
            backend=backend,  # type: ignore[arg-type]
            candidate=read_text(candidate, "candidate") if candidate else None,
            feedback=read_text(feedback, "feedback") if feedback else None,
        )
    except (SkillCardError, FileNotFoundError, ValueError, KeyError) as e:
        raise fail(str(e)) from None
    if as_json:
        typer.echo(json.dumps(messages, indent=2))
        return
    for m in messages:
        typer.secho(f"--- {m['role']} ---", bold=True)
        typer.echo(m["content"])


@skills_app.command("extract")
def skills_extract(
    response: Annotated[Path, typer.Argument(help="A coder's response (text or Markdown).")],
    as_json: JsonFlag = False,
) -> None:
    """Extract the candidate program from a coder's response, or say precisely why it cannot be."""
    from rubric_rl.skills import extract_program

    result = extract_program(read_text(response, "response"))
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    elif result.ok:
        typer.echo(result.program, nl=False)
        for note in result.notes:
            typer.secho(f"note: {note}", err=True, fg=typer.colors.YELLOW)
    else:
        typer.secho(f"no program ({result.error_code}): {result.error}", err=True, fg=typer.colors.RED)
    if not result.ok:
        raise typer.Exit(code=1)
