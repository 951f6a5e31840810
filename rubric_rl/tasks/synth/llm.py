"""The LLM composer: a model behind an OpenAI-compatible endpoint writes the program for a composition plan.

The plan (operators, input layout and sizes) comes from the programmatic composer; the model is asked, through
a prompt file (``compose_prompt.md``, ``$placeholders``), for one KernelBench-format program that fuses those
operators the way a real model would. Its answer is untrusted: the program is extracted from the fenced
blocks, must define ``Model``, ``get_inputs`` and ``get_init_inputs``, and must pass a static screen (imports
from torch and math only; no file, process, reflection or dynamic-code builtins) before any filter runs it.
Endpoint failures are retried (tenacity: rate limits, 5xx, timeouts, lost connections) and then recorded as a
composition failure; they never stop the run.
"""

from __future__ import annotations

import ast
import hashlib
import os
import string
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from rubric_rl.skills.parsing import find_code_blocks, strip_thinking
from rubric_rl.syntax import parse_python
from rubric_rl.tasks.synth.compose import Composition
from rubric_rl.tasks.synth.ops import SeedTable
from rubric_rl.tasks.task import TaskError, check_reference_source

BUNDLED_PROMPT = Path(__file__).with_name("compose_prompt.md")
ALLOWED_IMPORTS = frozenset(("torch", "torch.nn", "torch.nn.functional", "math"))
FORBIDDEN_NAMES = frozenset(
    "open exec eval compile __import__ globals locals vars input breakpoint getattr setattr delattr "
    "os sys subprocess importlib builtins shutil socket pathlib ctypes pickle".split()
)


class LLMComposerConfig(BaseModel):
    """The endpoint and limits of the LLM composer."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1.")
    model: str = Field(description="Model name sent to the endpoint.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Variable holding the key ('EMPTY' if unset).")
    prompt: Path = Field(
        default=BUNDLED_PROMPT, description="Prompt file ($ops, $n_ops, $layout, $shape, $device, $dtype, $window)."
    )
    temperature: float = Field(default=0.7, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int = Field(default=4096, ge=256, description="Completion token limit.")
    timeout_s: float = Field(default=120.0, gt=0, description="Limit of one request, seconds.")
    max_retries: int = Field(default=3, ge=0, le=10, description="Retries of a failed request.")
    backoff_initial_s: float = Field(default=1.0, gt=0, description="First retry delay (exponential, jitter).")
    backoff_max_s: float = Field(default=20.0, gt=0, description="Largest retry delay.")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Extra request fields for the server.")


def screen_program(code: str) -> str | None:
    """Why a model-written task program may not be run (None: it may)."""
    try:
        tree = parse_python(code)
    except SyntaxError as e:
        return f"does not parse: line {e.lineno}: {e.msg}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if a.name not in ALLOWED_IMPORTS]
        elif isinstance(node, ast.ImportFrom):
            bad = [node.module or "."] if node.module not in ALLOWED_IMPORTS else []
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return f"line {node.lineno}: uses {node.id}"
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr != "__init__":
            return f"line {node.lineno}: touches {node.attr}"
        else:
            continue
        if bad:
            return f"line {node.lineno}: imports {', '.join(bad)} (only {', '.join(sorted(ALLOWED_IMPORTS))})"
    return None


def extract_task_program(response: str) -> tuple[str | None, str | None]:
    """(program, None) or (None, why): the last fenced Python block defining Model and the two functions."""
    answer, _ = strip_thinking(response or "")
    blocks = [b.code for b in find_code_blocks(answer) if b.info in ("", "python", "py", "python3")]
    if not blocks and answer.strip():
        blocks = [answer]
    last_error = "no Python code block in the answer"
    for code in reversed(blocks):
        try:
            check_reference_source(code, "answer")
        except TaskError as e:
            last_error = str(e)
            continue
        return code.strip() + "\n", None
    return None, last_error


def _retryable(e: BaseException) -> bool:
    if isinstance(e, openai.APIConnectionError):
        return True
    return isinstance(e, openai.APIStatusError) and (e.status_code in (408, 409, 429) or e.status_code >= 500)


class LLMComposer:
    """``compose(plan)`` -> (program or None, what happened)."""

    def __init__(
        self, config: LLMComposerConfig, table: SeedTable, device: str, window_ms: tuple[float, float]
    ) -> None:
        self.config, self.table, self.device, self.window_ms = config, table, device, window_ms
        self.template = string.Template(config.prompt.read_text())
        self.prompt_digest = hashlib.sha256(self.template.template.encode()).hexdigest()[:16]
        self.client = openai.OpenAI(
            base_url=config.base_url,
            api_key=os.environ.get(config.api_key_env) or "EMPTY",
            timeout=config.timeout_s,
            max_retries=0,
        )

    def prompt(self, plan: Composition) -> str:
        ops = "\n".join(f"- {s.op.name} ({s.op.source})" for s in plan.steps)
        dims = ", ".join(f"{k}={d.value}" for k, d in plan.dims.items())
        window = f"between {self.window_ms[0]:g} and {self.window_ms[1]:g} ms"
        return self.template.substitute(
            ops=ops, layout=plan.layout, shape=dims, device=self.device, dtype=plan.dtype, n_ops=len(plan.steps),
            window=window,
        )  # fmt: skip

    def _ask(self, content: str) -> str:
        cfg = self.config
        for attempt in Retrying(
            stop=stop_after_attempt(cfg.max_retries + 1),
            wait=wait_exponential(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s) + wait_random(0, 0.1),
            retry=retry_if_exception(_retryable),
            reraise=True,
        ):
            with attempt:
                reply = self.client.chat.completions.create(
                    model=cfg.model,
                    messages=[{"role": "user", "content": content}],
                    temperature=cfg.temperature,
                    max_tokens=cfg.max_tokens,
                    extra_body=cfg.extra_body or None,
                )
        return reply.choices[0].message.content or ""

    def compose(self, plan: Composition) -> tuple[str | None, dict[str, Any]]:
        info: dict[str, Any] = {"model": self.config.model, "prompt_digest": self.prompt_digest}
        try:
            answer = self._ask(self.prompt(plan))
        except (openai.OpenAIError, ValueError) as e:  # the endpoint is a trust boundary: record, go on
            return None, {**info, "error": f"endpoint: {type(e).__name__}: {str(e)[:300]}"}
        program, why = extract_task_program(answer)
        if program is None:
            return None, {**info, "error": f"no usable program: {why}"}
        unsafe = screen_program(program)
        if unsafe is not None:
            return None, {**info, "error": f"refused by the static screen: {unsafe}"}
        return program, info
