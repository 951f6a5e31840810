"""What every ``rubric-rl`` command shares: the usage-error exit, the console, reading inputs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

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
