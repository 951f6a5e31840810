"""What every ``rubric-rl`` command shares: the usage-error exit, the console, reading inputs, showing a record."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code=2)


def console():  # deferred: rich is quick, but keep --help free of it
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 140)  # off a terminal rich would wrap at 80


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise fail(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"cannot read {what} {path}: {e}") from None


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML file of ``what`` fields, e.g. SandboxConfig's; an unreadable file or one that is no mapping exits 2."""
    import yaml

    try:
        data = yaml.safe_load(read_text(path, "config")) or {}
    except yaml.YAMLError as e:
        raise fail(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise fail(f"{path}: expected a mapping of {what} fields")
    return data


def show_record(text: str, out: Path | None, as_json: bool, panel: Callable[[], Any]) -> None:
    """A record's JSON ``text`` written to ``out`` when given, then printed: as JSON, or as the rich panel that
    ``panel()`` renders (called only then, so that --json never imports rich)."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    if as_json:
        typer.echo(text)
    else:
        console().print(panel())
