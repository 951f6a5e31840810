"""What the Planner / Coder / Verifier tests share (imported by name; conftest.py holds the fixtures): the scripted
planner and coder (a broken first program, a fixed one once it sees feedback), a small documentation folder, the
sandbox fields of the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stub_server import Reply

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "fused_add_relu"

PLAN = {
    "summary": "One fused elementwise kernel: add, relu and scale in a single pass over memory.",
    "bottlenecks": [{"op": "aten::add", "share": 0.4, "reason": "memory-bound; three passes over the tensors"}],
    "fusion_groups": [{"name": "fused_add_relu_scale", "ops": ["add", "relu", "mul"], "boundary": "the output"}],
    "tensors": [{"name": "x", "shape": [256, 4096], "dtype": "float32"}],
    "orchestration": {"launch": "one parallel loop over all elements", "cuda_graphs": False},
    "risks": ["relu must be applied before the scale"],
}

DOCS = {
    "best_practices.md": "# Memory Optimizations\n\nCoalesced access to global memory is the most important "
    "performance consideration. Vectorized loads raise the achieved bandwidth of memory-bound kernels.\n\n"
    "# Execution Configuration\n\nOccupancy is the ratio of active warps per multiprocessor to the maximum.\n",
    "graphs.html": "<html><body><h2>CUDA Graphs</h2><p>A CUDA graph removes the launch overhead of many small "
    "kernels by launching the whole work as one graph.</p><script>var x = 'launch overhead';</script></body></html>",
}


def fenced(path: Path) -> str:
    return f"Here is the program.\n\n```python\n{path.read_text()}```\n"


def task_of(request: dict[str, Any]) -> str | None:
    """The task a request is about (each task's reference carries a '# task ID' marker)."""
    text = "\n".join(m["content"] for m in request["messages"])
    for line in text.splitlines():
        if line.startswith("# task "):
            return line.split()[-1]
    return None


def role_of(request: dict[str, Any]) -> str:
    messages = request["messages"]
    if "You are the Planner" in messages[0]["content"]:
        return "planner"
    return "refine" if "Feedback on the current program" in messages[-1]["content"] else "generate"


class ScriptedRoles:
    """Answers as the planner (a valid plan) and the coder (generate: a program that does not compile; refine: the
    correct program), optionally slowly, so that a test can kill the run in the middle of a turn."""

    def __init__(self, refine_delay_s: float = 0.0) -> None:
        self.refine_delay_s = refine_delay_s

    def __call__(self, request: dict[str, Any]) -> Reply:
        role = role_of(request)
        if role == "planner":
            return Reply(content=f"```json\n{json.dumps(PLAN)}\n```", prompt_tokens=900, completion_tokens=150)
        if role == "refine":
            return Reply(
                content=fenced(EXAMPLE / "candidate_correct.py"),
                delay_s=self.refine_delay_s,
                prompt_tokens=1500,
                completion_tokens=600,
            )
        return Reply(content=fenced(EXAMPLE / "candidate_compile_error.py"), prompt_tokens=1000, completion_tokens=600)


# The one place these tests set sandbox fields (cheap timing on the cpu backend): the sandbox YAML form.
SANDBOX = {"timing": {"trials": 10, "warmup_trials": 1, "compile_baseline": False}, "correctness": {"trials": 2}}
