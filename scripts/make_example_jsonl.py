"""Regenerate examples/tasks.jsonl and examples/candidates.jsonl from the example programs.

Each folder of examples/ holds one reference.py and candidate_*.py files; the JSONL files are what
`make demo` feeds to `rubric-rl verify-batch`. tests/test_examples.py fails if they drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example_rows() -> tuple[list[dict], list[dict]]:
    tasks, candidates = [], []
    for pid, folder in enumerate(sorted(p for p in EXAMPLES.iterdir() if (p / "reference.py").exists()), start=1):
        tasks.append(
            {"level": None, "problem_id": pid, "name": folder.name, "code": (folder / "reference.py").read_text()}
        )
        for cand in sorted(folder.glob("candidate_*.py")):
            candidates.append(
                {
                    "candidate_id": f"{folder.name}/{cand.stem.removeprefix('candidate_')}",
                    "task_id": f"T-{pid}",
                    "code": cand.read_text(),
                }
            )
    return tasks, candidates


def main() -> None:
    tasks, candidates = example_rows()
    (EXAMPLES / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (EXAMPLES / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in candidates))
    print(f"{len(tasks)} tasks, {len(candidates)} candidates")


if __name__ == "__main__":
    main()
