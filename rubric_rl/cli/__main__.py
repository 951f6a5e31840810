"""``python -m rubric_rl.cli``: the ``rubric-rl`` command where its console script is not installed (a checkout)."""

from rubric_rl.cli import main

main()
