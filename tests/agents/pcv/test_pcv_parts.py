"""The loop's parts without the sandbox: plan parsing, the planner and coder against a real OpenAI-protocol
server, state folding (replans, what is refined, budgets), retrieval, the Verifier's feedback, run definitions."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from pcv_fixtures import PLAN, ScriptedRoles
from stub_server import Reply, StubOpenAIServer

from rubric_rl.agents.pcv.chat import ChatClient
from rubric_rl.agents.pcv.coder import Coder
from rubric_rl.agents.pcv.config import RolloutConfigError, load_rollout
from rubric_rl.agents.pcv.plan import parse_plan, render_plan
from rubric_rl.agents.pcv.planner import Planner
from rubric_rl.agents.pcv.profiling import profile_reference
from rubric_rl.agents.pcv.records import Turn
from rubric_rl.agents.pcv.retrieval import DocIndex, split_passages
from rubric_rl.agents.pcv.state import TaskState
from rubric_rl.agents.pcv.verifier import Verifier
from rubric_rl.sandbox import Verdict
from rubric_rl.skills.feedback import render_feedback
from rubric_rl.tasks import load_tasks

PLAN_JSON = json.dumps(PLAN)


@pytest.mark.parametrize(
    ("text", "ok", "error"),
    [
        (PLAN_JSON, True, None),
        (f"<think>hmm {{</think>\n```json\n{PLAN_JSON}\n```", True, None),
        (f"Here it is: {PLAN_JSON} done.", True, None),
        ("", False, "empty"),
        ("no json here", False, "no JSON object"),
        ('{"summary": "x", ', False, "no JSON object"),
        ('{"summary": "x", "fusion_groups": []}', False, "fusion_groups"),
        ('{"summary": "x"', False, "no JSON object"),
    ],
)
def test_parse_plan(text, ok, error):
    plan, why = parse_plan(text)
    assert (plan is not None) == ok
    if error:
        assert error in why


def test_render_plan_shows_every_part():
    plan, _ = parse_plan(PLAN_JSON)
    text = render_plan(plan)
    for part in (
        "Summary:",
        "aten::add (40% of time)",
        "1. fused_add_relu_scale: add, relu, mul",
        "[256, 4096] float32",
        "CUDA graphs: no",
        "relu must be applied",
    ):
        assert part in text


@pytest.fixture
def config(write_run, stub):
    return load_rollout(write_run(stub.url))


@pytest.fixture
def task(tasks_file):
    return load_tasks(tasks_file)[0]


def test_planner_repairs_an_invalid_plan_and_records_tokens(config, task):
    with StubOpenAIServer(model="stub") as server:
        server.script([Reply(content="I think we should fuse."), Reply(content=PLAN_JSON)])
        planner = Planner(
            config.planner.model_copy(update={"profile": False}),
            "cpu",
            ChatClient(config.planner.endpoint.model_copy(update={"base_url": server.url})),
        )
        turn = asyncio.run(planner.plan(task, index=0, history="(first plan)", reason=None))
        assert turn.plan is not None and turn.plan_error is None and turn.kind == "plan"
        assert turn.llm.attempts == 2 and turn.tokens == 2 * 120
        repair = server.requests[1]["messages"]
        assert "not a valid plan" in repair[-1]["content"] and repair[-2]["role"] == "assistant"
        first = server.requests[0]
        assert first["response_format"] == {"type": "json_object"}
        assert "# task T-1" in first["messages"][1]["content"] and "(no profile: profiling is off)" in str(first)


def test_planner_endpoint_failure_is_recorded_not_raised(config, task):
    with StubOpenAIServer(lambda r: Reply(status=503), model="stub") as server:
        planner = Planner(
            config.planner.model_copy(update={"profile": False}),
            "cpu",
            ChatClient(config.planner.endpoint.model_copy(update={"base_url": server.url})),
        )
        turn = asyncio.run(planner.plan(task, index=0, history="", reason=None))
    assert turn.endpoint_error == "http_503" and turn.plan is None and turn.llm.attempts == 2


def test_coder_uses_generate_then_refine_cards_with_the_plan(config, task, stub):
    coder = Coder(config.coder, "cpu", ChatClient(config.coder.endpoint))
    plan, _ = parse_plan(PLAN_JSON)
    first = coder.messages(task, plan)
    assert "Here is a PyTorch program" in first[1]["content"] and "The Planner's plan" in first[1]["content"]
    draft = asyncio.run(coder.write(task, plan, program="class ModelNew: pass", feedback="Status: compile_error"))
    assert draft.extraction.ok and "fused_add_relu_scale" in draft.extraction.program
    sent = stub.requests[-1]["messages"][1]["content"]
    assert "Feedback on the current program" in sent and "Status: compile_error" in sent and "fuse" in sent
    plain = Coder(config.coder.model_copy(update={"plan_prompt": None}), "cpu", ChatClient(config.coder.endpoint))
    assert plain.messages(task, plan) == plain.generate_card.render(reference=task.code, backend="cpu")


def _verdict(status="correct", speedup=None, **fields) -> Verdict:
    return Verdict.model_validate({"status": status, "candidate_sha256": "0" * 64, "speedup_eager": speedup, **fields})


def _coder(index, status, speedup=None, program="p", n=None) -> Turn:
    return Turn(
        task_id="T",
        index=index,
        role="coder",
        kind="refine",
        coder_turn=n,
        started_at=0,
        seconds=10,
        program=program,
        verdict=_verdict(status, speedup),
        feedback=f"feedback {index}",
        llm={"model": "m", "prompt_tokens": 100, "completion_tokens": 50},
    )


def _planner(index, kind="plan") -> Turn:
    plan, _ = parse_plan(PLAN_JSON)
    return Turn(task_id="T", index=index, role="planner", kind=kind, started_at=0, seconds=1, plan=plan)


def test_state_replans_after_failures_and_then_generates_afresh(config):
    p = config.planner
    s = TaskState.from_turns([_planner(0), _coder(1, "compile_error"), _coder(2, "incorrect")], p)
    assert s.replan_reason(p) == "2 coder turns in a row without a correct program"
    assert s.refine_inputs()[0].index == 2 and s.refine_inputs()[1] == "feedback 2"
    s.apply(_planner(3, "replan"), p)
    assert s.replan_reason(p) is None and s.refine_inputs() == (None, None) and s.replans == 1
    assert s.tokens == 300 and s.seconds == 22 and s.coder_turns == 2


def test_state_keeps_the_best_and_replans_on_stagnation(config):
    p = config.planner
    turns = [
        _planner(0),
        _coder(1, "correct", 1.5),
        _coder(2, "correct", 1.51),
        _coder(3, "incorrect"),
        _coder(4, "correct", 1.2),
        _coder(5, "correct", 1.52),
    ]
    s = TaskState.from_turns(turns, p)
    assert s.best.index == 5 and s.first_correct_turn == 1
    assert s.stagnant_in_row == 2 and "without a faster program" in s.replan_reason(p)
    s.apply(_planner(6, "replan"), p)
    assert s.refine_inputs() == (s.best, "feedback 5")
    assert s.stop_reason(config.budgets) == "max_turns"  # five coder turns, budget 2


def test_state_ignores_turns_that_failed_outside_the_model(config):
    p = config.planner
    infra = _coder(2, "runtime_error").model_copy(update={"verdict": _verdict("runtime_error", infra_error="lost GPU")})
    dead = Turn(task_id="T", index=3, role="coder", kind="refine", started_at=0, seconds=5, endpoint_error="timeout")
    s = TaskState.from_turns([_planner(0), _coder(1, "incorrect"), infra, dead], p)
    assert s.coder_turns == 1 and s.last_program.index == 1 and s.next_index == 4


def test_retrieval_ranks_the_relevant_passage_first(docs_dir):
    index = DocIndex(docs_dir, passage_chars=300)
    hits = index.search("launch overhead of many small kernels: cuda graphs", 2)
    assert hits[0].passage.source == "graphs.html" and hits[0].passage.heading == "CUDA Graphs"
    assert "var x" not in hits[0].passage.text  # scripts are not text
    best = index.search("coalesced global memory bandwidth", 1)[0]
    assert best.passage.heading == "Memory Optimizations"
    assert index.search("zzzz", 3) == []


def test_split_passages_cuts_long_paragraphs_at_boundaries():
    text = "# Title\n\n" + " ".join(f"Sentence {i} is here." for i in range(100))
    passages = split_passages(text, "f.md", 200)
    assert len(passages) > 5 and all(len(p.text) <= 200 for p in passages)
    assert {p.heading for p in passages} == {"Title"}


def test_verifier_feedback_is_the_training_renderer_on_failure_and_cites_docs_on_success(config, docs_dir):
    verifier = Verifier(config.verifier)
    failed = _verdict("incorrect", errors=["mismatch"])
    assert verifier.review(failed).feedback == render_feedback(failed, config.verifier.feedback)
    kernels = [
        {"name": "fused_add_relu_scale_kernel", "owner": "candidate", "calls": 1, "total_us": 60.0},
        {"name": "vectorized_elementwise_kernel", "owner": "torch", "calls": 20, "total_us": 40.0},
    ]
    ok = _verdict("correct", 1.3, kernels=kernels, own_kernel_time_share=0.6, speedup_compile=0.8)
    review = verifier.review(ok)
    assert review.feedback.startswith(render_feedback(ok, config.verifier.feedback))
    assert "## Optimisation guidance" in review.feedback and "40% of GPU time is still in PyTorch" in review.feedback
    assert "launch-bound" in review.feedback and "torch.compile is 1.25x faster" in review.feedback
    assert review.citations and all(f"[{c.index}] {c.source}" in review.feedback for c in review.citations)


def test_run_definition_errors_name_the_field(write_run, stub, tmp_path):
    with pytest.raises(RolloutConfigError, match="field budgets.max_turns"):
        load_rollout(write_run(stub.url, budgets={"max_turns": 0}))
    with pytest.raises(RolloutConfigError, match="field track: .*set track: libraries"):
        load_rollout(write_run(stub.url, sandbox={"policy": {"allowed_libraries": ["cublas"]}}))
    bad = tmp_path / "bad.md"
    bad.write_text("Plan for $reference with $nonsense")
    with pytest.raises(RolloutConfigError, match=r"planner.user_prompt: .*\['nonsense'\]"):
        load_rollout(write_run(stub.url, planner={"user_prompt": str(bad)}))
    with pytest.raises(RolloutConfigError, match="sandbox: .*backend"):
        load_rollout(write_run(stub.url, sandbox={"backend": "cuda"}))
    config = load_rollout(write_run(stub.url), {"budgets.max_turns": 5, "coder.endpoint.model": "other"})
    assert config.budgets.max_turns == 5 and config.coder.endpoint.model == "other"
    assert config.planner.user_prompt.name == "planner_user.md" and config.planner.user_prompt.exists()


def test_bundled_level3_definition_loads():
    config = load_rollout(Path(__file__).resolve().parents[3] / "rollouts" / "level3.yaml")
    assert config.device == "cuda" and config.tasks.levels == [3] and config.track == "own_kernels"


@pytest.mark.slow
def test_profile_reference_in_a_child_process(task):
    profile = asyncio.run(profile_reference(task.code, "cpu", top=5, timeout_s=120))
    assert profile.error is None and profile.outputs[0].shape == [256, 4096]
    assert {o.name for o in profile.ops} >= {"aten::add", "aten::mul"}
    broken = (
        "class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    raise SystemExit(3)\n"
    )
    assert "exit 3" in asyncio.run(profile_reference(broken, "cpu", top=5, timeout_s=60)).error
    hang = broken.replace("raise SystemExit(3)", "while True: pass")
    t = time.monotonic()
    assert asyncio.run(profile_reference(hang, "cpu", top=5, timeout_s=3)).error.startswith("timeout")
    assert time.monotonic() - t < 30


def test_scripted_roles_answer_by_role(stub):
    assert isinstance(stub.responder, ScriptedRoles)
