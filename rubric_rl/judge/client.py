"""LLMJudge: a rubric judge behind any OpenAI-compatible chat-completions endpoint (``vllm serve``, hosted APIs).

One judgment is ``samples`` independent requests, each:

- sent with a JSON-schema ``response_format`` built from the rubric; if the server rejects that (400/422) the
  request is re-sent with ``json_object``, then with no format, and the first one that works is kept for the
  judge's lifetime;
- retried by tenacity on 429, 5xx, timeouts, connection errors and garbled bodies (explicit stop, exponential
  backoff with jitter, Retry-After honoured up to the backoff cap), while holding one slot of the concurrency
  semaphore per attempt (not while backing off);
- parsed strictly against the rubric; an unusable answer gets a bounded number of repair follow-ups.

The scores are averaged over the samples that succeeded. A sample that still fails is recorded with its reason;
when none succeeds the Judgment is the rubric's neutral fallback with ``judge_failed`` set. Nothing here
raises for an endpoint failure: the endpoint is a trust boundary and its errors become typed fields.
Successful judgments go to the persistent cache; identical requests in flight at the same time share one call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from rubric_rl import __version__
from rubric_rl.judge.cache import JudgmentCache, cache_key
from rubric_rl.judge.config import JudgeConfig, StructuredOutput
from rubric_rl.judge.parsing import answer_schema, parse_answer
from rubric_rl.judge.prompt import Message, bounded, build_messages, prompt_sha256, repair_message
from rubric_rl.judge.record import JudgeIdentity, Judgment, SampleRecord, Usage
from rubric_rl.judge.request import JudgeRequest
from rubric_rl.judge.rubric import PromptTemplate, Rubric, load_prompt, load_rubric_and_prompt
from rubric_rl.judge.scoring import assemble

logger = logging.getLogger(__name__)

_RETRY_STATUS = {408, 409, 425, 429}
_DOWNGRADE: dict[str, StructuredOutput] = {"json_schema": "json_object", "json_object": "none"}
_MAX_DETAIL = 500


def is_retryable(e: BaseException) -> bool:
    """Errors a retry can fix: rate limits, server errors, timeouts, lost connections, garbled bodies."""
    if isinstance(e, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(e, openai.APIStatusError):
        return e.status_code in _RETRY_STATUS or e.status_code >= 500
    return isinstance(e, json.JSONDecodeError)


def error_code(e: BaseException) -> str:
    if isinstance(e, openai.APITimeoutError):
        return "timeout"
    if isinstance(e, openai.APIConnectionError):
        return "connection"
    if isinstance(e, openai.APIStatusError):
        return f"http_{e.status_code}"
    return "bad_response"


def _retry_after_s(e: BaseException | None) -> float | None:
    if not isinstance(e, openai.APIStatusError):
        return None
    value = e.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class Backoff:
    """Exponential backoff with jitter; a server's Retry-After lengthens it, the cap bounds both."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self._exp = wait_exponential(multiplier=initial_s, max=max_s) + wait_random(0, initial_s)
        self._max_s = max_s

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = self._exp(retry_state)
        outcome = retry_state.outcome
        after = _retry_after_s(outcome.exception() if outcome is not None else None)
        return min(max(delay, after or 0.0), self._max_s)


@dataclass
class ClientStats:
    """Counters over the judge's lifetime (for logs and benchmarks)."""

    judgments: int = 0
    judgments_failed: int = 0
    requests: int = 0
    retries: int = 0
    repairs: int = 0
    samples_failed: int = 0
    format_fallbacks: int = 0
    cache_hits: int = 0
    shared_in_flight: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _LoopState:
    """The HTTP client, semaphore and in-flight table of one event loop (asyncio objects are loop-bound)."""

    def __init__(self, config: JudgeConfig, api_key: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.client = openai.AsyncOpenAI(
            base_url=config.base_url, api_key=api_key, timeout=config.timeout_s, max_retries=0
        )
        self.semaphore = asyncio.Semaphore(config.concurrency)
        self.in_flight: dict[str, asyncio.Future[Judgment]] = {}


def _retrieve(f: asyncio.Future[Judgment]) -> None:
    if not f.cancelled():
        f.exception()  # mark a leader's exception as seen when nobody shared the call


class LLMJudge:
    """A Judge that asks an LLM; see the module docstring for the request, retry and failure policy."""

    def __init__(
        self,
        config: JudgeConfig,
        *,
        rubric: Rubric | None = None,
        prompt: PromptTemplate | None = None,
        cache: JudgmentCache | None = None,
        api_key: str | None = None,
    ) -> None:
        if config.kind != "llm" or config.base_url is None or not config.model:
            raise ValueError("base_url: LLMJudge needs an endpoint and a model (JudgeConfig.resolved() fills them)")
        self.config = config
        if rubric is None:
            rubric, prompt = load_rubric_and_prompt(config.rubric)
        elif prompt is None:
            prompt = load_prompt(rubric)
        self.rubric = rubric
        self.prompt = prompt
        self.cache = cache if cache is not None else (JudgmentCache(config.cache_file()) if config.cache else None)
        self.stats = ClientStats()
        self._api_key = api_key if api_key is not None else config.api_key()
        self._format: StructuredOutput = (
            "json_schema" if config.structured_output == "auto" else config.structured_output
        )
        self._schema = answer_schema(rubric)
        self._state: _LoopState | None = None
        self.identity = JudgeIdentity(
            kind="llm",
            label=f"llm judge {config.model} at {config.base_url}",
            model=config.model,
            base_url=config.base_url,
            rubric=rubric.name,
            rubric_version=rubric.version,
            rubric_hash=rubric.content_hash,
            prompt=prompt.name,
            prompt_version=prompt.version,
            prompt_hash=prompt.content_hash,
            temperature=config.temperature,
            samples=config.samples,
            code_version=f"rubric-rl {__version__}",
        )

    @property
    def sampling_params(self) -> dict[str, Any]:
        c = self.config
        return {"temperature": c.temperature, "samples": c.samples, "max_tokens": c.max_tokens, "seed": c.seed}

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = _LoopState(self.config, self._api_key)
        return self._state

    async def judge(self, request: JudgeRequest) -> Judgment:
        started = time.perf_counter()
        messages, notes = build_messages(request, self.rubric, self.prompt, max_block_chars=self.config.max_block_chars)
        psha = prompt_sha256(messages)
        key = cache_key(
            rubric=self.rubric.name,
            rubric_version=self.rubric.version,
            rubric_hash=self.identity.rubric_hash,
            model=self.config.model or "",
            prompt_sha256=psha,
            params=self.sampling_params,
        )
        state = self._loop_state()

        def reused(j: Judgment) -> Judgment:
            update = {"cache_hit": True, "latency_s": time.perf_counter() - started, "task_id": request.task_id}
            return j.model_copy(update=update)

        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return reused(hit)
        pending = state.in_flight.get(key)
        if pending is not None:
            try:
                shared = await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this caller was cancelled
                # the call it waited for was cancelled: make it here instead
            else:
                self.stats.shared_in_flight += 1
                return reused(shared)

        future: asyncio.Future[Judgment] = state.loop.create_future()
        future.add_done_callback(_retrieve)
        state.in_flight[key] = future
        try:
            judgment = await self._judge_uncached(request, messages, psha, notes, started)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as e:  # a bug: whoever shares this call sees it too
            future.set_exception(e)
            raise
        finally:
            state.in_flight.pop(key, None)
        future.set_result(judgment)
        if self.cache is not None and all(s.ok for s in judgment.samples):
            self.cache.put(key, judgment)
        return judgment

    async def _judge_uncached(
        self, request: JudgeRequest, messages: list[Message], psha: str, notes: list[str], started: float
    ) -> Judgment:
        samples = await asyncio.gather(*(self._sample(messages, i) for i in range(self.config.samples)))
        judgment = assemble(
            self.rubric,
            self.identity,
            request,
            list(samples),
            latency_s=time.perf_counter() - started,
            prompt_sha256=psha,
            notes=notes,
        )
        self.stats.judgments += 1
        if judgment.judge_failed:
            self.stats.judgments_failed += 1
            logger.warning(
                "judge %s failed on candidate %s: %s; neutral fallback recorded",
                self.config.model,
                judgment.candidate_sha256[:12],
                judgment.failure,
            )
        return judgment

    async def _sample(self, messages: list[Message], index: int) -> SampleRecord:
        started = time.perf_counter()
        record = SampleRecord(index=index, ok=False)
        conversation = list(messages)
        seed = None if self.config.seed is None else self.config.seed + index
        for round_ in range(self.config.repair_attempts + 1):
            try:
                completion = await self._complete(conversation, seed, record)
            except (openai.OpenAIError, ValueError) as e:  # trust boundary: the endpoint, after retries
                record.error, record.error_detail = error_code(e), str(e)[:_MAX_DETAIL]
                break
            if completion.usage is not None:
                record.usage = record.usage + Usage(
                    prompt_tokens=completion.usage.prompt_tokens,
                    completion_tokens=completion.usage.completion_tokens,
                    total_tokens=completion.usage.total_tokens,
                )
            choice = completion.choices[0] if completion.choices else None
            content = choice.message.content if choice is not None else None
            parsed = parse_answer(content, self.rubric)
            if parsed.answer is not None:
                record.ok, record.error, record.error_detail = True, None, None
                record.scores = parsed.answer.scores
                record.rationales = parsed.answer.rationales
                record.flags = parsed.answer.flags
                break
            reason = parsed.error or "the answer could not be parsed"
            if choice is not None and choice.finish_reason == "length":
                reason += " (the answer was cut off at the token limit; be brief)"
            record.error, record.error_detail = f"unparseable:{parsed.error_code}", reason[:_MAX_DETAIL]
            if round_ < self.config.repair_attempts:
                record.repairs += 1
                self.stats.repairs += 1
                shown, _ = bounded(content or "", 4000)
                conversation = [
                    *conversation,
                    {"role": "assistant", "content": shown},
                    repair_message(reason, self.rubric, self.prompt),
                ]
        record.latency_s = time.perf_counter() - started
        if not record.ok:
            self.stats.samples_failed += 1
            logger.info("judge sample %d failed: %s (%s)", index, record.error, record.error_detail)
        return record

    async def _complete(self, messages: list[Message], seed: int | None, record: SampleRecord) -> ChatCompletion:
        """One completion, with retries, stepping down the response format if the server rejects it."""
        fmt = self._format
        while True:
            try:
                completion = await self._with_retries(messages, seed, fmt, record)
            except (openai.BadRequestError, openai.UnprocessableEntityError) as e:
                step = _DOWNGRADE.get(fmt) if self.config.structured_output == "auto" else None
                if step is None:
                    raise
                logger.info("server rejected response_format %s (%s); trying %s", fmt, str(e)[:200], step)
                fmt = step
                continue
            if fmt != self._format:
                logger.warning(
                    "%s does not accept response_format %s; using %s", self.config.base_url, self._format, fmt
                )
                self._format = fmt
                self.stats.format_fallbacks += 1
            record.response_format = fmt
            return completion

    async def _with_retries(
        self, messages: list[Message], seed: int | None, fmt: StructuredOutput, record: SampleRecord
    ) -> ChatCompletion:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if seed is not None:
            kwargs["seed"] = seed
        if self.config.extra_body:
            kwargs["extra_body"] = self.config.extra_body
        if fmt == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": f"{self.rubric.name}_judgment", "schema": self._schema, "strict": True},
            }
        elif fmt == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=Backoff(self.config.backoff_initial_s, self.config.backoff_max_s),
            retry=retry_if_exception(is_retryable),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        return await retrying(self._request, kwargs, record)

    async def _request(self, kwargs: dict[str, Any], record: SampleRecord) -> ChatCompletion:
        state = self._loop_state()
        async with state.semaphore:
            record.attempts += 1
            self.stats.requests += 1
            completion: ChatCompletion = await state.client.chat.completions.create(**kwargs)
            return completion

    def _before_sleep(self, retry_state: RetryCallState) -> None:
        self.stats.retries += 1
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        sleep = retry_state.next_action.sleep if retry_state.next_action is not None else 0.0
        logger.debug(
            "judge request attempt %d failed (%s); retrying in %.2fs",
            retry_state.attempt_number,
            error_code(exc) if exc is not None else "?",
            sleep,
        )

    async def aclose(self) -> None:
        if self._state is not None and self._state.loop is asyncio.get_running_loop():
            await self._state.client.close()
        self._state = None
        if self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> LLMJudge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
