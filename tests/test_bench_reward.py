"""scripts/bench_reward.py: the broken variants it makes of an honest candidate, and the mix over K."""

from __future__ import annotations

import ast

import pytest
import torch

from rubric_rl.skills import extract_program


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("bench_reward")


@pytest.fixture(scope="module")
def summary(load_script):
    return load_script("bench_reward_summary")


@pytest.fixture(scope="module")
def honest(examples_dir) -> str:
    return (examples_dir / "fused_add_relu" / "candidate_correct.py").read_text()


@pytest.mark.parametrize(
    ("kind", "marker"),
    [
        ("honest", None),
        ("compile_error", "#error deliberately broken"),
        ("wrong", "fill_(0.123)"),
        ("hack", "torch.allclose = lambda"),
        ("hang", "while True:"),
    ],
)
def test_variants_are_programs(bench, honest, kind, marker) -> None:
    program = bench.variant(honest, kind)
    assert program is not None
    tree = ast.parse(program)
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"] == ["ModelNew"]
    if marker:
        assert marker in program
    assert extract_program(bench.respond(program)).program == program.rstrip() + "\n"


def test_unparsable_has_no_program(bench, honest) -> None:
    assert bench.variant(honest, "unparsable") is None
    assert not extract_program(bench.respond(None)).ok


def test_mix_cycles_over_k(bench) -> None:
    assert bench.parse_mix("honest=2,hang=1", 5) == ["honest", "honest", "hang", "honest", "honest"]
    with pytest.raises(SystemExit, match="unknown variant 'oops'"):
        bench.parse_mix("oops=1", 2)


def test_a_recipes_reward_kwargs_are_its_own_with_the_ledger_moved(bench, tmp_path) -> None:
    from rubric_rl.resources import content_dir

    recipe = content_dir("recipes") / "one-gpu-try" / "recipe.yaml"
    kwargs = bench.recipe_reward_kwargs(recipe, tmp_path / "run")
    assert kwargs["rule"] == {"name": "speedup"} and kwargs["mix"] == {"name": "stitchcuda"}
    assert kwargs["judge"]["offline"] is True
    assert kwargs["ledger"] == {"dir": str(tmp_path / "run")}  # not verl's ${trainer.default_local_dir}
    assert "backend" not in kwargs  # the reward's own default decides (cuda where a GPU is visible)


def test_a_recipe_without_rubric_rls_reward_is_refused(bench, tmp_path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(
        "reward:\n  custom_reward_function:\n    path: my_reward.py\n    name: score\n    reward_kwargs: {}\n"
    )
    with pytest.raises(SystemExit, match="not rubric_rl's"):
        bench.recipe_reward_kwargs(other, tmp_path)
    (tmp_path / "none.yaml").write_text("trainer: {}\n")
    with pytest.raises(SystemExit, match="no reward.custom_reward_function"):
        bench.recipe_reward_kwargs(tmp_path / "none.yaml", tmp_path)


_SUPER_BY_NAME = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.scale = 2.0

    def forward(self, x):
        return x * self.scale
"""


def test_broken_forwards_load_where_the_program_names_its_own_class(bench) -> None:
    """53 of the KernelBench candidates call ``super(ModelNew, self).__init__()``: a variant that subclassed a renamed
    ModelNew recursed forever at construction there, so its "wrong" and "hang" responses were runtime errors."""
    wrong: dict = {}
    exec(compile(bench.variant(_SUPER_BY_NAME, "wrong"), "candidate.py", "exec"), wrong)
    model = wrong["ModelNew"]()
    out = model(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 0.123))

    hang: dict = {}
    exec(compile(bench.variant(_SUPER_BY_NAME, "hang"), "candidate.py", "exec"), hang)
    model = hang["ModelNew"]()  # constructs (the hang is in forward only)
    assert hang["ModelNew"].forward is hang["_hanging_forward"]


def test_stage_means_split_the_evaluation_into_builds_waits_and_worker_time(summary) -> None:
    stages = [
        {"total_s": 10.0, "build_s": 4.0, "device_wait_s": 1.0, "static_s": 0.5},
        {"total_s": 20.0, "build_s": 0.0, "device_wait_s": 3.0, "static_s": 0.5},
    ]
    assert summary.mean_stages(stages) == {
        "total_s": 15.0, "build_s": 2.0, "device_wait_s": 2.0, "static_s": 0.5, "worker_s": 10.5
    }  # fmt: skip
    assert summary.mean_stages([]) is None


def test_the_reward_phase_takes_each_samples_stages_from_its_ledger_record(bench, tmp_path) -> None:
    from rubric_rl.reward.ledger import ledger_dir, write_ledger
    from rubric_rl.reward.record import RewardRecord
    from rubric_rl.sandbox.verdict import StageDurations, Verdict

    def record(task: str, index: int, total: float) -> RewardRecord:
        verdict = Verdict(
            status="correct", task_id=task, candidate_sha256="0" * 64, durations=StageDurations(total_s=total)
        )
        return RewardRecord(
            sample_id=f"{task}-{index}", task_id=task, index=index, data_source="bench", skill="generate",
            response="...", verdict=verdict, score=1.0, config_hash="h",
        )  # fmt: skip

    ledger_dir(tmp_path).mkdir(parents=True)
    write_ledger(
        [record("T-1", 0, 5.0), record("T-1", 1, 7.0), record("T-2", 0, 9.0)], ledger_dir(tmp_path) / "a.jsonl"
    )
    results = [{"sample": ("T-1", 1)}, {"sample": ("T-2", 0)}, {"sample": ("T-3", 0)}]
    out = bench.with_ledger_stages(results, tmp_path)
    assert [r.get("stages", {}).get("total_s") for r in out] == [7.0, 9.0, None]


def test_a_phase_without_a_ledger_keeps_its_results(bench, tmp_path) -> None:
    results = [{"sample": ("T-1", 0), "seconds": 1.0}]
    assert bench.with_ledger_stages(results, tmp_path / "no-run") == [{"sample": ("T-1", 0), "seconds": 1.0}]


def test_slots_per_gpu_reach_both_phases_and_keep_a_recipes_executor_fields(bench, tmp_path) -> None:
    import argparse

    from rubric_rl.resources import content_dir
    from rubric_rl.reward.config import RewardConfig

    args = argparse.Namespace(recipe=None, device="cuda", ray=False, slots_per_gpu=3, stage_floor=None)
    assert bench.executor_fields(args) == {"slots_per_gpu": 3}
    kwargs = bench.reward_kwargs(args, tmp_path / "run")
    assert kwargs["executor"] == {"slots_per_gpu": 3}
    assert RewardConfig.load(kwargs).executor_config().slots_per_gpu == 3
    assert bench.reward_config(args).executor_config().slots_per_gpu == 3  # the executor-alone phase's
    args.recipe = content_dir("recipes") / "one-gpu-try" / "recipe.yaml"
    own = bench.recipe_reward_kwargs(args.recipe, tmp_path / "run").get("executor") or {}
    assert bench.reward_kwargs(args, tmp_path / "run")["executor"] == {**own, "slots_per_gpu": 3}
    args.slots_per_gpu = None
    assert bench.reward_kwargs(args, tmp_path / "run").get("executor") == (own or None)
    args.capture_workers = 0  # captures on the build workers, as before they had their own
    assert bench.executor_fields(args) == {"capture_workers": 0}
    assert bench.reward_config(args).executor_config().capture_workers == 0


def test_the_phase_order_names_both_phases_once(bench) -> None:
    assert bench.phase_order("reward, exec") == ["reward", "exec"]
    for bad in ("exec", "exec,exec", "exec,reward,judge"):
        with pytest.raises(SystemExit, match="--order"):
            bench.phase_order(bad)


def test_a_stage_floor_reaches_both_phases_and_keeps_a_recipes_sandbox_fields(bench, tmp_path) -> None:
    import argparse

    from rubric_rl.reward.config import REWARD_STAGE_FLOOR_S

    args = argparse.Namespace(recipe=None, device="cpu", ray=False, slots_per_gpu=None, stage_floor=None)
    assert bench.reward_config(args).sandbox_config("cpu").limits.stage_timeout_floor_s == REWARD_STAGE_FLOOR_S
    args.stage_floor = 30.0
    kwargs = bench.reward_kwargs(args, tmp_path / "run")
    assert kwargs["sandbox"] == {"limits": {"stage_timeout_floor_s": 30.0}}
    assert bench.reward_config(args).sandbox_config("cpu").limits.stage_timeout_floor_s == 30.0  # executor alone


def test_the_correct_samples_longest_silences_are_the_most_of_each_stage(summary) -> None:
    results = [
        {"status": "correct", "silence": {"load": 1.0, "correctness": 0.5}},
        {"status": "correct", "silence": {"load": 0.2, "correctness": 2.5, "timing": 0.1}},
        {"correct": True, "silence": {"correctness": 3.0}},  # a reward result: its status from its flags
    ]
    assert summary.longest_silence(results) == {"load": 1.0, "correctness": 3.0, "timing": 0.1}
    hung = {"status": "timeout", "silence": {"correctness": 10.0}}  # not a legitimate candidate's: left out
    rows = [{**r, "variant": "honest", "seconds": 4.0 + i} for i, r in enumerate([*results, hung])]
    honest = summary.summarize_phase("reward (cold)", rows, 10.0)["variants"]["honest"]
    assert honest["longest_silence_s"] == {"load": 1.0, "correctness": 3.0, "timing": 0.1}
    assert honest["first_s"] == 4.0


def test_the_executor_alone_gets_the_samples_in_the_order_the_reward_workers_submit_them(bench) -> None:
    rows = [{"task": t, "variant": v} for t in ("A", "B") for v in ("honest", "honest", "wrong", "hang")]
    chunks = bench.worker_chunks(rows, 4)
    assert [[r["variant"] for r in c] for c in chunks] == [["honest"] * 2, ["honest"] * 2, ["wrong"] * 2, ["hang"] * 2]
    order = bench.submission_order(rows, 4)
    assert [(r["task"], r["variant"]) for r in order[:4]] == [("A", "honest"), ("B", "honest")] * 2
    assert sorted(map(id, order)) == sorted(map(id, rows))  # every sample once


def test_the_adapters_own_seconds_are_each_reward_calls_time_less_its_evaluation(summary) -> None:
    results = [
        {"variant": "honest", "seconds": 10.5, "evaluate_s": 10.0},
        {"variant": "hack", "seconds": 0.3, "evaluate_s": 0.1},
    ]
    own = summary.summarize_phase("reward (cold)", results, 11.0)["adapter_s"]
    assert own == pytest.approx({"mean": 0.35, "max": 0.5})
    assert summary.summarize_phase("exec (cold)", [{"variant": "honest", "seconds": 1.0}], 1.0)["adapter_s"] is None


def test_the_queue_table_lists_each_phases_executor_stages_and_its_prebuild_work(summary) -> None:
    wait = {"now": 1, "n": 2, "sum": 3.0, "mean": 1.5, "max": 2.0}
    stats = {"waits_s": {"slot": wait}, "prebuilds": {"shared": 4, "capture": wait}}
    report = {"phases": [{"phase": "exec (cold)", "executor_stats": stats}, {"phase": "reward (cold)"}]}
    assert summary.queue_rows(report) == [
        ["exec (cold)", "slot", "1", "2", "1.50", "2.0", "3"],
        ["exec (cold)", "prebuild: capture", "1", "2", "1.50", "2.0", "3"],
    ]  # the shared count is no stage; a phase without stats (Ray workers) has no rows
