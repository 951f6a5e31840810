"""The ``rubric-rl`` command. Each subcommand is thin: it parses flags, builds typed configs, calls the library,
and prints (a rich table, or JSON with ``--json``). Heavy imports happen inside commands so ``--help`` is fast.
One module per command group; this one only assembles them.

Exit codes: 0 when the command did its job (a Verdict was reached, whatever it says); 2 for bad usage or
unreadable inputs, with a message naming what is wrong.
"""

from __future__ import annotations

import typer

from rubric_rl.cli.judge import judge
from rubric_rl.cli.report import report
from rubric_rl.cli.reward import reward_app
from rubric_rl.cli.rollout import rollout
from rubric_rl.cli.serve import serve
from rubric_rl.cli.skills import skills_app
from rubric_rl.cli.tasks import tasks_app
from rubric_rl.cli.train import train
from rubric_rl.cli.verify import verify, verify_batch

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__.split("\n\n")[0])
app.add_typer(tasks_app, name="tasks")
app.add_typer(skills_app, name="skills")
app.add_typer(reward_app, name="reward")
app.command()(verify)
app.command("verify-batch")(verify_batch)
app.command()(judge)
app.command()(train)
app.command()(serve)
app.command()(rollout)
app.command()(report)


def main() -> None:
    app()


__all__ = ["app", "main"]
