"""LLMJudge against a real HTTP server on 127.0.0.1 speaking the chat-completions protocol (scripted answers)."""

import asyncio
import json
import threading

import pytest
from stub_server import Reply, answer_from_schema

from rubric_rl.judge import JudgmentCache, LLMJudge, build_request, judge_all


def _run(judge, *requests):
    async def go():
        try:
            return await judge_all(judge, list(requests))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def _one(judge, request):
    return _run(judge, request)[0]


def test_well_formed_scores(stub_server, llm_config, request_, rubric, make_answer):
    scores = {"anti_hacking": 5, "cuda_engineering": 3, "operator_coverage": 4, "skill_compliance": 1}
    stub_server.script([Reply(content=make_answer(rubric, scores), prompt_tokens=900, completion_tokens=120)])
    j = _one(LLMJudge(llm_config), request_)
    assert not j.judge_failed and not j.cache_hit
    assert j.scores == {k: float(v) for k, v in scores.items()}
    assert j.raw_total == pytest.approx((1 + 0.5 + 0.75 + 0) / 4) and j.total == j.raw_total
    assert j.dimensions[0].rationale == "because anti_hacking"
    assert j.identity.kind == "llm" and j.identity.model == "stub-judge" and j.identity.base_url == stub_server.url
    assert j.identity.rubric == "stitchcuda" and j.identity.rubric_hash == rubric.content_hash
    assert j.usage.prompt_tokens == 900 and j.usage.completion_tokens == 120 and j.latency_s > 0
    assert j.samples[0].attempts == 1 and j.samples[0].response_format == "json_schema"
    sent = stub_server.requests[0]
    assert sent["model"] == "stub-judge" and sent["temperature"] == 0.0
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"]["properties"]["dimensions"]["required"][0] == (
        "anti_hacking"
    )


def test_malformed_json_is_repaired_once(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.script([Reply(content="I think it deserves a 4."), Reply(content=make_answer(rubric, 2))])
    j = _one(LLMJudge(llm_config), request_)
    assert not j.judge_failed and j.scores["anti_hacking"] == 2.0
    assert j.samples[0].repairs == 1 and j.samples[0].attempts == 2
    repair = stub_server.requests[1]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert repair[2]["content"] == "I think it deserves a 4."
    assert "could not be used: the answer is not a JSON object" in repair[3]["content"]


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ("not json at all", "unparseable:not_json"),
        ("{not: json}", "unparseable:not_json"),
        ('{"dimensions": {"anti_hacking": {"rationale": "x", "score": 9}}}', "unparseable:missing_dimension"),
    ],
)
def test_persistently_unparseable_answers_fall_back(stub_server, llm_config, request_, bad, code):
    stub_server.responder = lambda request: Reply(content=bad)
    j = _one(LLMJudge(llm_config), request_)
    assert j.judge_failed and not j.samples[0].ok and j.samples[0].error == code
    assert j.samples[0].repairs == 1 and stub_server.request_count == 2  # one repair, then give up
    assert j.total == pytest.approx(0.5) and all(d.score == 3.0 for d in j.dimensions)  # neutral, not zero
    assert "all 1 sample(s) failed" in j.failure


def test_out_of_range_scores_get_a_repair_naming_the_problem(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.script([Reply(content=make_answer(rubric, 7)), Reply(content=make_answer(rubric, 5))])
    j = _one(LLMJudge(llm_config), request_)
    assert not j.judge_failed and j.total == 1.0
    assert "score 7 is outside 1..5" in stub_server.requests[1]["messages"][-1]["content"]


def test_missing_dimension_then_fallback(stub_server, llm_config, request_, rubric, make_answer):
    partial = json.loads(make_answer(rubric, 4))
    del partial["dimensions"]["operator_coverage"]
    stub_server.responder = lambda request: Reply(content=json.dumps(partial))
    j = _one(LLMJudge(llm_config), request_)
    assert j.judge_failed and j.samples[0].error == "unparseable:missing_dimension"
    assert "operator_coverage" in j.samples[0].error_detail


def test_429_then_success(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.script([Reply(status=429, headers={"Retry-After": "0.02"}), Reply(content=make_answer(rubric, 4))])
    judge = LLMJudge(llm_config)
    j = _one(judge, request_)
    assert not j.judge_failed and j.samples[0].attempts == 2
    assert stub_server.statuses == [429, 200] and judge.stats.retries == 1


def test_persistent_500_is_bounded_and_falls_back(stub_server, llm_config, request_):
    stub_server.responder = lambda request: Reply(status=500)
    judge = LLMJudge(llm_config)
    j = _one(judge, request_)
    assert j.judge_failed and j.samples[0].error == "http_500"
    assert stub_server.request_count == llm_config.max_retries + 1 == j.samples[0].attempts
    assert j.total == pytest.approx(0.5) and j.dimensions[0].rationale.startswith("judge failed")
    assert len(JudgmentCache(llm_config.cache_file())) == 0  # a failure is never cached


def test_client_errors_are_not_retried(stub_server, llm_config, request_):
    stub_server.responder = lambda request: Reply(status=401)
    j = _one(LLMJudge(llm_config), request_)
    assert j.judge_failed and j.samples[0].error == "http_401" and stub_server.request_count == 1


def test_garbled_body_is_retried(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.script([Reply(body="<html>bad gateway</html>"), Reply(content=make_answer(rubric, 3))])
    j = _one(LLMJudge(llm_config), request_)
    assert not j.judge_failed and j.samples[0].attempts == 2


def test_slow_responses_time_out_and_fall_back(stub_server, llm_config, request_):
    stub_server.responder = lambda request: Reply(content="{}", delay_s=1.0)
    cfg = llm_config.model_copy(update={"timeout_s": 0.1, "max_retries": 1})
    j = _one(LLMJudge(cfg), request_)
    assert j.judge_failed and j.samples[0].error == "timeout" and j.samples[0].attempts == 2
    assert j.latency_s < 0.9


def test_concurrency_cap_is_respected(stub_server, llm_config, fused_reference, rubric, make_answer):
    stub_server.responder = lambda request: Reply(content=make_answer(rubric, 4), delay_s=0.05)
    cfg = llm_config.model_copy(update={"concurrency": 4, "cache": False})
    requests = [build_request("generate", fused_reference, f"# candidate {i}\n") for i in range(16)]
    judgments = _run(LLMJudge(cfg), *requests)
    assert len(judgments) == 16 and not any(j.judge_failed for j in judgments)
    assert stub_server.max_in_flight == 4


def test_cache_hits_skip_the_endpoint_and_persist(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.responder = lambda request: Reply(content=make_answer(rubric, 4))
    first = _one(LLMJudge(llm_config), request_)
    judge = LLMJudge(llm_config)  # a new judge (new process, same file)
    again = _one(judge, request_.model_copy(update={"task_id": "same-candidate-other-task"}))
    assert stub_server.request_count == 1 and again.task_id == "same-candidate-other-task"
    assert again.cache_hit and not first.cache_hit and again.scores == first.scores
    assert judge.stats.cache_hits == 1
    other_model = _one(LLMJudge(llm_config.model_copy(update={"model": "other"})), request_)
    assert not other_model.cache_hit and stub_server.request_count == 2
    assert len(JudgmentCache(llm_config.cache_file())) == 2


def test_cache_key_covers_rubric_and_sampling(stub_server, llm_config, request_, make_answer):
    stub_server.responder = lambda request: Reply(content=answer_from_schema(request, 4))
    _one(LLMJudge(llm_config), request_)
    _one(LLMJudge(llm_config.model_copy(update={"temperature": 0.7})), request_)
    _one(LLMJudge(llm_config.model_copy(update={"rubric": "anti_hacking_strict"})), request_)
    assert stub_server.request_count == 3


def test_identical_requests_in_flight_share_one_call(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.responder = lambda request: Reply(content=make_answer(rubric, 4), delay_s=0.1)
    cfg = llm_config.model_copy(update={"cache": False})
    judgments = _run(LLMJudge(cfg), request_, request_, request_)
    assert stub_server.request_count == 1
    assert [j.cache_hit for j in judgments] == [False, True, True]


def test_samples_are_averaged(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.script([Reply(content=make_answer(rubric, s)) for s in (2, 3, 5)])
    cfg = llm_config.model_copy(update={"samples": 3, "temperature": 0.8, "seed": 10})
    j = _one(LLMJudge(cfg), request_)
    assert j.scores["cuda_engineering"] == pytest.approx(10 / 3)
    assert sorted(j.dimensions[0].sample_scores) == [2, 3, 5] and len(j.samples) == 3
    assert sorted(r["seed"] for r in stub_server.requests) == [10, 11, 12]


def test_a_failed_sample_is_recorded_and_the_rest_averaged(stub_server, llm_config, request_, rubric, make_answer):
    lock = threading.Lock()
    calls = []

    def responder(request):
        with lock:
            calls.append(1)
            first = len(calls) == 1
        return Reply(status=503) if first else Reply(content=make_answer(rubric, 4))

    stub_server.responder = responder
    cfg = llm_config.model_copy(update={"samples": 2, "max_retries": 0})
    judge = LLMJudge(cfg)
    j = _one(judge, request_)
    assert not j.judge_failed and [s.ok for s in j.samples].count(False) == 1
    assert j.scores["anti_hacking"] == 4.0 and "1/2 sample(s) failed" in j.notes[-1]
    assert len(JudgmentCache(cfg.cache_file())) == 0  # partial results are not cached


def test_server_without_json_schema_support_falls_back_once(stub_server, llm_config, request_, rubric, make_answer):
    def responder(request):
        if (request.get("response_format") or {}).get("type") == "json_schema":
            return Reply(status=400)
        return Reply(content=make_answer(rubric, 4))

    stub_server.responder = responder
    judge = LLMJudge(llm_config.model_copy(update={"cache": False}))
    other = build_request("generate", request_.reference, "# another candidate\n")

    async def go():
        first = await judge.judge(request_)
        n = stub_server.request_count
        second = await judge.judge(other)
        await judge.aclose()
        return first, second, n

    first, second, n_first = asyncio.run(go())
    kinds = [(r.get("response_format") or {}).get("type") for r in stub_server.requests]
    assert kinds[:n_first] == ["json_schema", "json_object"]  # stepped down once...
    assert kinds[n_first:] == ["json_object"]  # ...and remembered
    assert not first.judge_failed and first.samples[0].response_format == "json_object"
    assert second.samples[0].response_format == "json_object" and judge.stats.format_fallbacks == 1


def test_judge_flag_gate_zeroes_the_total(stub_server, llm_config, request_, rubric, make_answer):
    stub_server.script([Reply(content=make_answer(rubric, 5, flags={"major_hacking": True}))])
    j = _one(LLMJudge(llm_config), request_)
    assert j.raw_total == 1.0 and j.total == 0.0 and j.gates_fired == ["major_hacking"]
    assert "raised in 1/1" in j.gates[0].reasons[0]


def test_verdict_gate_applies_even_when_the_judge_fails(stub_server, llm_config, request_, make_verdict):
    stub_server.responder = lambda request: Reply(status=500)
    request = request_.model_copy(update={"verdict": make_verdict("hack")})
    j = _one(LLMJudge(llm_config.model_copy(update={"max_retries": 0})), request)
    assert j.judge_failed and j.total == 0.0 and j.gates_fired == ["major_hacking"]
    assert j.verdict_status == "hack"


def test_no_sample_is_ever_lost(stub_server, llm_config, fused_reference, rubric, make_answer):
    """Mixed failures across a batch: every request gets a Judgment with every sample recorded."""
    lock = threading.Lock()
    counter = [0]
    script = [
        Reply(status=429),
        Reply(status=500),
        Reply(content="garbage"),
        Reply(content="{}"),
        Reply(status=502),
        Reply(content=make_answer(rubric, 4)),
    ]

    def responder(request):
        with lock:
            counter[0] += 1
            return script[counter[0] % len(script)]

    stub_server.responder = responder
    cfg = llm_config.model_copy(update={"samples": 2, "max_retries": 1, "cache": False})
    requests = [build_request("generate", fused_reference, f"# c{i}\n") for i in range(12)]
    judgments = _run(LLMJudge(cfg), *requests)
    assert len(judgments) == 12
    assert [j.candidate_sha256 for j in judgments] == [r.candidate_sha256 for r in requests]
    assert all(len(j.samples) == 2 for j in judgments)
    for j in judgments:
        assert 0.0 <= j.total <= 1.0
        assert j.judge_failed == (not any(s.ok for s in j.samples))
        assert all(s.ok or s.error for s in j.samples)
    assert stub_server.request_count <= 12 * 2 * (cfg.max_retries + 1) * (cfg.repair_attempts + 1)


def test_judgment_round_trips_as_json(stub_server, llm_config, request_, rubric, make_answer):
    from rubric_rl.judge import Judgment

    stub_server.script([Reply(content=make_answer(rubric, 4))])
    j = _one(LLMJudge(llm_config), request_)
    assert Judgment.model_validate_json(j.model_dump_json()) == j
