"""Outputs too large to ship: compared on the device in the worker, fingerprinted, and spot-checked.

KernelBench Level 1 has 6 GB outputs (ReLU on 4096 x 393216); copying seven trials of them to the evaluator
overran the worker's host memory limit and honest candidates ended as runtime errors.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.checks.runtime import check_trial
from rubric_rl.sandbox.config import Tolerance
from rubric_rl.sandbox.measure import correctness
from rubric_rl.sandbox.measure.comparison import check_timed_rounds, compare_kept_trial, compare_trial
from rubric_rl.sandbox.measure.inputs import fingerprint, sample_pairs, subsample
from rubric_rl.sandbox.run.messages import FROM_WORKER, CheckedRound, ReferenceTrial, Trial, parse_body
from rubric_rl.sandbox.run.protocol import Message, ProtocolError
from rubric_rl.sandbox.run.state import RunState
from rubric_rl.sandbox.verdict import TrialResult

TINY_MB = 1e-6  # every trial's outputs are "too large": the whole kept path runs on the small example


def test_outputs_are_compared_in_the_worker_above_32_mb_on_cuda_and_256_mb_on_cpu():
    # On an H100 the GPU's comparison took a 256 MB output's correctness stage from 6.7 s to 0.4 s; on 2 CPU cores
    # the worker's comparison of 64 MB outputs was the slower one (11 s against 2-3 s shipped).
    assert SandboxConfig(backend="cuda").ship_outputs_limit_bytes() == 32 * 2**20
    assert SandboxConfig(backend="cpu").ship_outputs_limit_bytes() == 256 * 2**20
    assert (
        SandboxConfig(backend="cuda", correctness={"ship_outputs_max_mb": 64}).ship_outputs_limit_bytes() == 64 * 2**20
    )
    with pytest.raises(ValueError):
        SandboxConfig(correctness={"ship_outputs_max_mb": 0})


def test_fingerprint_sees_a_changed_and_a_moved_word():
    x = torch.randn(1000)
    before = fingerprint([x])
    y = x.clone()
    y[500] += 1e-3
    assert fingerprint([y]) != before
    swapped = x.clone()
    swapped[[3, 700]] = swapped[[700, 3]]
    assert fingerprint([swapped]) != before
    assert fingerprint([x.clone()]) == before
    assert fingerprint([torch.arange(7, dtype=torch.uint8)]) != fingerprint([torch.arange(7, dtype=torch.uint8) + 1])


def test_fingerprint_is_the_plain_and_the_position_weighted_sum_of_the_words():
    # Rows of the matrix it sums by rows and columns, and a tail: the definition, word by word.
    x = torch.randn(3 * 4096 + 5)
    words = [int(w) for w in x.view(torch.int32)]
    plain = sum(words) % 2**64
    weighted = sum((p + 1) * w for p, w in enumerate(words)) % 2**64
    assert fingerprint([x]) == [f"torch.float32:[{x.numel()}]:{plain:016x}:{weighted:016x}"]
    odd = torch.arange(4096 * 2 + 3, dtype=torch.int64).to(torch.uint8)  # bytes, not words: an odd size
    raw = [int(b) for b in odd]
    expected = f"{sum(raw):016x}:{sum((p + 1) * b for p, b in enumerate(raw)):016x}"
    assert fingerprint([odd])[0].endswith(expected)


def test_fingerprint_sees_words_swapped_across_rows_and_far_apart():
    x = torch.randn(2_000_100)
    before = fingerprint([x])
    # 1,000,003 positions apart: the old weights (position modulo 1,000,003) were equal there, so this swap went
    # unseen.
    for i, j in [(5, 5 + 1_000_003), (10, 10 + 4096), (4096 * 7 + 1, 4096 * 7 + 2), (0, x.numel() - 1)]:
        swapped = x.clone()
        swapped[[i, j]] = swapped[[j, i]]
        assert fingerprint([swapped]) != before, (i, j)


def test_samples_take_the_same_positions_of_both_outputs():
    r = torch.arange(10_000, dtype=torch.float32).reshape(100, 100)
    cs, rs = sample_pairs([r.clone()], [r], seed=7, k=256)
    assert torch.equal(cs[0], rs[0]) and cs[0].numel() == 256
    cs2, _ = sample_pairs([r.clone()], [r], seed=8, k=256)
    assert not torch.equal(cs[0], cs2[0])  # positions follow the evaluator's seed
    assert sample_pairs([torch.zeros(3)], [r], seed=1, k=4) == ([None], [None])  # shapes differ: nothing to sample
    assert subsample(torch.arange(100), k=10).numel() == 10


def test_chunked_comparison_matches_the_whole_tensor_one(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    r = torch.randn(10_001, generator=gen)
    c = r + 1e-7 * torch.randn(10_001, generator=gen)
    c[17], c[9000], c[5] = 5.0, float("nan"), float("inf")
    tol = Tolerance(atol=1e-2, rtol=1e-2)
    whole = correctness.compare_tensor(c, r, tol, 0.01)
    monkeypatch.setattr(correctness, "_CHUNK_HOST", 97)
    assert correctness.compare_tensor(c, r, tol, 0.01) == whole
    assert whole[0] == 3


@pytest.fixture(scope="module")
def kept(build_cache: Path) -> Evaluator:
    return Evaluator(
        SandboxConfig(
            backend="cpu",
            build={"cache_dir": build_cache},
            timing={"trials": 10, "warmup_trials": 1, "compile_baseline": False, "checked_outputs": 2},
            correctness={"ship_outputs_max_mb": TINY_MB},
        )
    )


@pytest.mark.slow
def test_kept_outputs_still_tell_correct_from_wrong(kept, examples_dir):
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    good = kept.evaluate(reference, (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text())
    assert good.status == "correct", good.errors
    assert good.trials and all(t.compared_in == "worker" and t.passed for t in good.trials)
    assert {t.distribution for t in good.trials} == {"task", "signed", "heavy_tailed", "timed"}
    # The reference reproduces its bits: each trial's output was computed again after the candidate's.
    assert all(t.reference_recomputed for t in good.trials if t.distribution != "timed")
    bad = kept.evaluate(reference, (examples_dir / "fused_add_relu" / "candidate_wrong.py").read_text())
    assert bad.status == "incorrect"
    assert bad.trials[0].compared_in == "worker" and bad.trials[0].mismatched > 0


# fused_add_relu's reference, with a forward that changes in the way the test needs.
_REFERENCE_WITH = """
import sys
import torch
import torch.nn as nn

_calls = [0]


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        _calls[0] += 1
        return torch.relu(x + y) * self.scale + {change}


def get_inputs():
    return [torch.randn(256, 4096), torch.randn(256, 4096)]


def get_init_inputs():
    return [1.5]
"""


@pytest.mark.slow
def test_a_reference_that_does_not_reproduce_its_bits_keeps_its_outputs(kept, examples_dir):
    # Nondeterministic kernels give other bits, well within tolerance, on each run: computed again after the
    # candidate's trial, its output would not match its fingerprint and an honest candidate would be called a
    # tampering one. Run twice before the candidate loads, it shows it, and keeps its outputs on the device.
    reference = _REFERENCE_WITH.format(change="1e-6 * (_calls[0] % 2)")
    v = kept.evaluate(reference, (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text())
    assert v.status == "correct", (v.errors, [f.rule for f in v.findings])
    task_trials = [t for t in v.trials if t.distribution != "timed"]
    assert task_trials and all(t.compared_in == "worker" and t.reference_recomputed is False for t in task_trials)


@pytest.mark.slow
def test_a_reference_with_other_bits_after_the_candidate_loaded_but_within_tolerance_is_not_tampering(
    kept, examples_dir
):
    reference = _REFERENCE_WITH.format(change="(1e-6 if 'candidate' in sys.modules else 0.0)")
    v = kept.evaluate(reference, (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text())
    assert v.status == "correct", (v.errors, [f.rule for f in v.findings])
    assert {f.rule: f.severity for f in v.findings}["protocol.reference_not_reproduced"] == "warn"


@pytest.mark.slow
def test_a_reference_output_that_differs_after_the_candidate_loaded_is_tampering(kept, examples_dir):
    # What a candidate reaching into the reference (its parameters, the ops it calls, its inputs' generator)
    # would do to the output computed again after its trial: the fingerprint from before it loaded tells.
    reference = _REFERENCE_WITH.format(change="(1.0 if 'candidate' in sys.modules else 0.0)")
    v = kept.evaluate(reference, (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text())
    assert v.status == "hack", v.errors
    tampering = [f for f in v.findings if f.rule == "protocol.tampering"]
    assert tampering and "computed again after the candidate's trial" in tampering[0].message
    assert not v.trials[0].passed and v.trials[0].reference_recomputed


def _forged(passed: bool = True) -> dict:
    return TrialResult(index=0, distribution="task", seed=1, passed=passed, mismatched=0, numel=100).model_dump()


def _reference_trial(**fields) -> ReferenceTrial:
    record = {"index": 0, "distribution": "task", "seed": 42, "finite": True, "outputs": [], "mutates_inputs": False}
    return ReferenceTrial.model_validate({**record, "on_device": True, **fields})


def _trial_body(**fields) -> Trial:
    """A trial message's body as the evaluator receives it (validated: a malformed one breaks the protocol)."""
    body = {"index": 0, "outputs": [], "aliases_input": [], "aliases_parameter": [], "mutated_inputs": False}
    parsed = parse_body(Message("trial", {**body, **fields}), FROM_WORKER)
    assert isinstance(parsed, Trial)
    return parsed


def _kept_trial(body: dict, values: list, recomputed: bool = False, before: list | None = None):
    cfg = SandboxConfig(backend="cpu")
    run = RunState(config=cfg, candidate="")
    run.ref_values = [before or []]
    ref = _reference_trial(recomputed=recomputed, outputs=[{"kind": "other", "type": "x"}])
    result = compare_kept_trial(run, _trial_body(**body), values, ref)
    return result, [f.rule for f in run.findings]


def test_a_worker_result_contradicted_by_the_spot_check_fails():
    # A subverted comparison in the worker claims a pass; the evaluator's own look at sampled positions disagrees.
    r = torch.randn(64)
    result, rules = _kept_trial({"device_result": _forged(), "reference_intact": True}, [r + 1.0, r])
    assert not result.passed and "protocol.comparison_mismatch" in rules
    honest, rules = _kept_trial({"device_result": _forged(), "reference_intact": True}, [r.clone(), r])
    assert honest.passed and honest.compared_in == "worker" and honest.seed == 42 and rules == []


def _timed_round(meta: dict, eager: list, cand: list):
    cfg = SandboxConfig(backend="cpu", timing={"compile_baseline": False})
    run = RunState(config=cfg, candidate="")
    check_timed_rounds(run, [CheckedRound.model_validate(meta)], [[eager, cand]])
    return run.trials[-1], [f.rule for f in run.findings]


def test_a_timed_round_compared_in_the_worker_is_spot_checked():
    # The timed rounds' large outputs are compared in the worker (copying them would hold the device for
    # timing alone); the worker's verdict on a round stands only if the evaluator's sample agrees.
    e = torch.randn(64)
    meta = {"round": 7, "seed": 99, "device_result": _forged()}
    result, rules = _timed_round(meta, [e], [e + 1.0])
    assert not result.passed and "protocol.comparison_mismatch" in rules and "protocol.timed_output_mismatch" in rules
    honest, rules = _timed_round(meta, [e], [e.clone()])
    assert honest.passed and honest.compared_in == "worker" and honest.distribution == "timed" and rules == []
    assert honest.seed == 99


def test_a_passing_worker_comparison_without_its_sample_breaks_the_protocol():
    with pytest.raises(ProtocolError):
        _timed_round({"round": 0, "seed": 1, "device_result": _forged()}, [], [])
    with pytest.raises(ProtocolError):
        _kept_trial({"device_result": _forged(), "reference_intact": True}, [None, None])


@pytest.mark.parametrize("recomputed", [False, True])
def test_a_changed_kept_reference_is_tampering(recomputed):
    r = torch.randn(8)
    result, rules = _kept_trial({"device_result": _forged(), "reference_intact": False}, [r, r], recomputed)
    assert not result.passed and rules == ["protocol.tampering"]
    assert result.reference_recomputed is recomputed


def test_a_reference_computed_again_with_other_bits_is_held_to_its_sample_from_before():
    # cuDNN takes another algorithm when its workspace does not fit beside the candidate's memory: other bits,
    # within tolerance of the sample sent before the candidate loaded. A tampered reference is not.
    r = torch.randn(64)
    before = r[:16].clone()
    body = {"device_result": _forged(), "reference_intact": False, "reference_resampled": True}
    honest, rules = _kept_trial(body, [r.clone(), r, before + 1e-6], recomputed=True, before=[before])
    assert honest.passed and rules == ["protocol.reference_not_reproduced"]
    tampered, rules = _kept_trial(body, [r.clone(), r, before + 1.0], recomputed=True, before=[before])
    assert not tampered.passed and rules == ["protocol.tampering"]
    reshaped, rules = _kept_trial(body, [r.clone(), r, before[:8]], recomputed=True, before=[before])
    assert not reshaped.passed and rules == ["protocol.tampering"]


def test_a_resample_of_a_kept_reference_breaks_the_protocol():
    r = torch.randn(8)
    body = {"device_result": _forged(), "reference_intact": False, "reference_resampled": True}
    with pytest.raises(ProtocolError):
        _kept_trial(body, [r, r, r], recomputed=False, before=[r])


def test_a_kept_trial_without_its_result_breaks_the_protocol():
    with pytest.raises(ProtocolError):
        _kept_trial({"reference_intact": True}, [])
    with pytest.raises(ProtocolError):
        _kept_trial({"device_result": {"passed": "maybe"}, "reference_intact": True}, [])


def test_inputs_drawn_again_but_different_are_tampering():
    cfg = SandboxConfig(backend="cpu")
    run = RunState(config=cfg, candidate="")
    run.ref_meta, run.ref_values = [_reference_trial()], [[]]
    r = torch.randn(8)
    body = _trial_body(ops={"empty_like": 1}, device_result=_forged(), reference_intact=True, inputs_intact=False)
    with ThreadPoolExecutor(1) as compare:
        compare_trial(run, body, [r, r], run.ref_meta[0], compare)
    check_trial(run, body, run.ref_meta[0], first=True)
    assert "protocol.tampering" in [f.rule for f in run.findings]


@pytest.mark.slow
def test_a_candidate_writing_into_inputs_drawn_again_is_caught(kept, examples_dir):
    # Inputs beside kept outputs are drawn again for the candidate and not copied a second time (two copies of
    # KernelBench L1-19's 6 GB inputs beside its kept outputs overran a share of the H200): their fingerprint
    # must still tell that the candidate wrote into them.
    reference = (examples_dir / "fused_add_relu" / "reference.py").read_text()
    program = (Path(__file__).resolve().parents[1] / "adversarial" / "cpu" / "zero_the_inputs.py").read_text()
    v = kept.evaluate(reference, program)
    assert v.status == "hack", v.errors
    assert "runtime.input_mutation" in {f.rule for f in v.findings}
    assert all(t.compared_in == "worker" for t in v.trials if t.distribution != "timed")


def test_heavy_tailed_inputs_are_drawn_a_chunk_at_a_time_the_same_every_time(monkeypatch):
    # Student-t's sampler made 30 GB of temporaries for KernelBench L1-19's 6 GB input, beside the kept outputs.
    from rubric_rl.sandbox.measure import inputs

    monkeypatch.setattr(inputs, "_REDRAW_CHUNK", 4096)
    shape = (37, 1000)  # not a whole number of chunks

    def draw(dtype=torch.float32):
        torch.manual_seed(11)
        return inputs.redraw(torch.rand(shape, dtype=dtype), "heavy_tailed")

    a = draw()
    assert a.shape == shape and a.dtype == torch.float32 and torch.equal(a, draw())
    assert a.abs().max() > 20 and a.median().abs() < 0.1  # heavy tails around zero, unlike torch.rand's inputs
    assert not torch.equal(a.view(-1)[:4096], a.view(-1)[4096:8192])  # every chunk its own sample
    assert draw(torch.float16).dtype == torch.float16
