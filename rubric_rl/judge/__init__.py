"""LLM rubric judges: rubric files (judges/*.yaml), prompts, an OpenAI-compatible client with retries, cache and
fallbacks, and an offline heuristic judge that is the default when no endpoint is configured.

    judge = make_judge(JudgeConfig(rubric="stitchcuda"))     # endpoint from config or env, else offline
    judgment = await judge.judge(build_request("generate", reference, candidate, verdict=verdict))
"""

from pathlib import Path

from rubric_rl.judge.base import Judge, judge_all
from rubric_rl.judge.cache import JudgmentCache, cache_key
from rubric_rl.judge.client import ClientStats, LLMJudge
from rubric_rl.judge.config import ENV_BASE_URL, ENV_MODEL, JudgeConfig, default_judge_cache
from rubric_rl.judge.offline import HeuristicJudge
from rubric_rl.judge.parsing import ParsedAnswer, ParseResult, answer_schema, parse_answer
from rubric_rl.judge.prompt import build_messages
from rubric_rl.judge.record import DimensionScore, GateResult, JudgeIdentity, Judgment, SampleRecord, Usage
from rubric_rl.judge.request import JudgeRequest, build_request
from rubric_rl.judge.rubric import (
    Dimension,
    Gate,
    PromptTemplate,
    Rubric,
    RubricError,
    bundled_rubrics,
    load_prompt,
    load_rubric,
    load_rubric_and_prompt,
)


def make_judge(config: JudgeConfig | None = None, rubric: Rubric | str | Path | None = None) -> Judge:
    """The judge a config describes: an LLMJudge when it (or the environment) names an endpoint, else the
    offline HeuristicJudge. ``rubric`` (an object, a path or a bundled name) overrides ``config.rubric``."""
    cfg = (config or JudgeConfig()).resolved()
    rubric_obj = rubric if isinstance(rubric, Rubric) else load_rubric(rubric if rubric is not None else cfg.rubric)
    if cfg.kind == "llm":
        return LLMJudge(cfg, rubric=rubric_obj)
    return HeuristicJudge(cfg, rubric=rubric_obj)


__all__ = [
    "ENV_BASE_URL",
    "ENV_MODEL",
    "ClientStats",
    "Dimension",
    "DimensionScore",
    "Gate",
    "GateResult",
    "HeuristicJudge",
    "Judge",
    "JudgeConfig",
    "JudgeIdentity",
    "JudgeRequest",
    "Judgment",
    "JudgmentCache",
    "LLMJudge",
    "ParseResult",
    "ParsedAnswer",
    "PromptTemplate",
    "Rubric",
    "RubricError",
    "SampleRecord",
    "Usage",
    "answer_schema",
    "build_messages",
    "build_request",
    "bundled_rubrics",
    "cache_key",
    "default_judge_cache",
    "judge_all",
    "load_prompt",
    "load_rubric",
    "load_rubric_and_prompt",
    "make_judge",
    "parse_answer",
]
