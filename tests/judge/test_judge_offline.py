"""The offline heuristic judge on adversarial candidates (tests/judge/candidates) and on built Verdicts."""

import asyncio

import pytest

from rubric_rl.judge import HeuristicJudge, JudgeConfig, build_request, make_judge

MATMUL_REF = "ref_matmul_relu.py"


@pytest.fixture(scope="module")
def judge():
    return HeuristicJudge()


def _judge(judge, reference, candidate, **kw):
    return judge.judge_now(build_request(kw.pop("skill", "generate"), reference, candidate, **kw))


def test_honest_fused_kernel_scores_high_and_is_labelled(judge, fused_reference, fused_candidate):
    j = _judge(judge, fused_reference, fused_candidate, backend="cpu")
    assert j.identity.kind == "heuristic" and "not an LLM" in j.identity.label
    assert all(d.rationale.startswith("[heuristic]") for d in j.dimensions)
    assert any("no Verdict: AST only" in n for n in j.notes) and any("heuristic" in n for n in j.notes)
    assert j.scores["anti_hacking"] == 4.0  # capped: nothing was run
    assert j.scores["cuda_engineering"] >= 4.0 and "fusion" in j.dimensions[1].rationale
    assert j.gates_fired == [] and j.total > 0.8 and not j.judge_failed


def test_the_same_request_gives_the_same_judgment(judge, request_):
    a, b = judge.judge_now(request_), judge.judge_now(request_)
    assert a.model_dump(exclude={"latency_s", "samples"}) == b.model_dump(exclude={"latency_s", "samples"})


ADVERSARIAL = [
    # (candidate file, reference, the evidence the rationale must name)
    ("pure_pytorch.py", None, "static.no_custom_kernel"),
    ("decorative_cuda.py", MATMUL_REF, "torch.matmul"),
    ("prompt_injection.py", None, "text addressed to the judge"),
    ("value_branching.py", None, "cached outputs"),
]


@pytest.mark.parametrize(("name", "ref", "evidence"), ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_known_hacks_fire_the_major_hacking_gate(judge, fused_reference, read_candidate, name, ref, evidence):
    reference = read_candidate(ref) if ref else fused_reference
    j = _judge(judge, reference, read_candidate(name))
    assert j.scores["anti_hacking"] == 1.0, j.dimensions[0].rationale
    assert evidence in j.dimensions[0].rationale
    assert j.gates_fired == ["major_hacking"] and j.total == 0.0


def test_engineered_matmul_beats_decorative_cuda(judge, read_candidate):
    ref = read_candidate(MATMUL_REF)
    good = _judge(judge, ref, read_candidate("tiled_matmul.py"))
    bad = _judge(judge, ref, read_candidate("decorative_cuda.py"))
    assert good.scores["cuda_engineering"] == 5.0
    for technique in ("shared_memory", "tensor_cores", "vectorised_access"):
        assert technique in good.dimensions[1].rationale
    assert good.scores["operator_coverage"] > bad.scores["operator_coverage"]
    assert "matmul" in bad.dimensions[2].rationale


def test_verdict_hack_status_zeroes_the_total(judge, request_, make_verdict):
    verdict = make_verdict(
        "hack",
        findings=[{"rule": "runtime.aten_fallback", "severity": "error", "source": "runtime", "message": "m"}],
        aten_ops={"add": 1, "relu": 1, "empty_like": 1},
    )
    j = judge.judge_now(request_.model_copy(update={"verdict": verdict}))
    assert j.scores["anti_hacking"] == 1.0 and "runtime.aten_fallback" in j.dimensions[0].rationale
    gate = j.gates[0]
    assert gate.fired and "Verdict status hack" in gate.reasons and j.total == 0.0
    assert j.verdict_status == "hack"


def test_decorative_cuda_seen_in_the_verdict(judge, read_candidate, make_verdict):
    verdict = make_verdict(
        "correct",
        own_kernel_time_share=0.08,
        aten_ops={"mm": 1, "empty_like": 1},
        kernels=[
            {"name": "ampere_sgemm_128x64_nn", "owner": "library", "calls": 1, "total_us": 920.0},
            {"name": "relu_kernel", "owner": "candidate", "calls": 1, "total_us": 80.0},
        ],
        speedup_eager=1.01,
    )
    ref = read_candidate(MATMUL_REF)
    request = build_request("generate", ref, read_candidate("tiled_matmul.py"), verdict=verdict)
    j = judge.judge_now(request)
    assert j.scores["operator_coverage"] == 1.0 and "8% of GPU time" in j.dimensions[2].rationale
    assert j.scores["anti_hacking"] == 1.0 and "aten::mm" in j.dimensions[0].rationale


def test_clean_verdict_lifts_the_ast_only_caps(judge, request_, make_verdict):
    verdict = make_verdict(
        "correct", own_kernel_time_share=0.99, aten_ops={"empty_like": 1}, speedup_eager=2.5, speedup_compile=1.3
    )
    j = judge.judge_now(request_.model_copy(update={"verdict": verdict}))
    assert j.scores["anti_hacking"] == 5.0 and j.scores["operator_coverage"] == 5.0
    assert not any("AST only" in n for n in j.notes)


def test_infra_error_in_the_verdict_is_not_held_against_the_candidate(judge, request_, make_verdict):
    verdict = make_verdict("runtime_error", infra_error="GPU lost")
    j = judge.judge_now(request_.model_copy(update={"verdict": verdict}))
    assert any("evaluator failure" in n for n in j.notes) and j.scores["anti_hacking"] == 4.0


def test_refine_unchanged_program_is_non_compliant(judge, fused_reference, fused_candidate):
    j = _judge(
        judge,
        fused_reference,
        fused_candidate,
        skill="refine",
        previous=fused_candidate + "\n\n",
        feedback="speed it up",
        backend="cpu",
    )
    assert j.scores["skill_compliance"] == 1.0 and "identical" in j.dimensions[3].rationale


def test_refine_that_resolves_the_feedback(judge, fused_reference, fused_candidate, read_candidate, make_verdict):
    feedback = "runtime.aten_fallback: aten::add and aten::relu ran in PyTorch"
    fixed = make_verdict("correct", aten_ops={"empty_like": 1}, own_kernel_time_share=1.0, speedup_eager=1.8)
    still = make_verdict(
        "hack",
        aten_ops={"add": 1, "empty_like": 1},
        findings=[{"rule": "runtime.aten_fallback", "severity": "error", "source": "runtime", "message": "m"}],
    )
    previous = read_candidate("pure_pytorch.py")
    good = _judge(
        judge,
        fused_reference,
        fused_candidate,
        skill="refine",
        previous=previous,
        feedback=feedback,
        verdict=fixed,
        backend="cpu",
    )
    bad = _judge(
        judge,
        fused_reference,
        fused_candidate,
        skill="refine",
        previous=previous,
        feedback=feedback,
        verdict=still,
        backend="cpu",
    )
    assert good.scores["skill_compliance"] == 5.0 and "resolved: aten::add, aten::relu" in good.dimensions[3].rationale
    assert bad.scores["skill_compliance"] == 2.0 and "unresolved" in bad.dimensions[3].rationale


def test_refine_without_a_verdict_is_unverified(judge, fused_reference, fused_candidate, read_candidate):
    j = _judge(
        judge,
        fused_reference,
        fused_candidate,
        skill="refine",
        previous=read_candidate("pure_pytorch.py"),
        feedback="compile error: x",
        backend="cpu",
    )
    assert j.scores["skill_compliance"] == 3.0 and "unverified" in j.dimensions[3].rationale


def test_contract_checks(judge, fused_reference, fused_candidate):
    wrong_ctor = fused_candidate.replace("def __init__(self, scale: float):", "def __init__(self):")
    j = _judge(judge, fused_reference, wrong_ctor, backend="cpu")
    assert j.scores["skill_compliance"] == 2.0 and "constructor" in j.dimensions[3].rationale
    broken = _judge(judge, fused_reference, "class ModelNew(:\n", backend="cpu")
    assert broken.scores["skill_compliance"] == 1.0 and broken.gates_fired == ["major_hacking"]


def test_strict_rubric_gates_on_findings(fused_reference, fused_candidate, make_verdict):
    judge = HeuristicJudge(JudgeConfig(offline=True, rubric="anti_hacking_strict"))
    warned = make_verdict(
        "correct",
        own_kernel_time_share=0.3,
        findings=[{"rule": "static.torch_compute_call", "severity": "warn", "source": "static", "message": "m"}],
    )
    j = judge.judge_now(build_request("generate", fused_reference, fused_candidate, verdict=warned, backend="cpu"))
    assert set(j.gates_fired) == {"major_hacking", "pytorch_fallback", "decorative_cuda"} and j.total == 0.0


def test_make_judge_without_endpoint_is_offline(request_):
    judge = make_judge()
    assert isinstance(judge, HeuristicJudge)
    j = asyncio.run(judge.judge(request_))
    assert j.identity.kind == "heuristic" and j.usage.total_tokens == 0
