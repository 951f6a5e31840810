"""Skill datasets: verl RL parquet (generate, refine), split by task, eval tasks excluded, lengths measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from skill_rows import ledger_row, program, verdict
from typer.testing import CliRunner

from rubric_rl.cli import app
from rubric_rl.sandbox import Verdict
from rubric_rl.skills.dataset import DatasetConfig, build_dataset, refine_reason, task_split
from rubric_rl.skills.feedback import render_feedback
from rubric_rl.skills.ledger import LedgerError, read_ledger, read_verdicts_file
from rubric_rl.tasks import load_tasks

runner = CliRunner()


def read_rows(path: Path) -> list[dict]:
    import datasets

    return list(datasets.load_dataset("parquet", data_files=str(path))["train"])


def test_generate_dataset_is_split_by_task_and_leaves_eval_tasks_out(task_file, tmp_path):
    manifest = build_dataset(load_tasks(task_file), DatasetConfig(val_fraction=0.25, backend="cpu"), tmp_path / "d")
    train, val = read_rows(tmp_path / "d" / "train.parquet"), read_rows(tmp_path / "d" / "val.parquet")
    assert len(train) + len(val) == 12 and train and val
    train_ids = {r["extra_info"]["task_id"] for r in train}
    val_ids = {r["extra_info"]["task_id"] for r in val}
    assert not train_ids & val_ids
    assert manifest["excluded_eval_tasks"] == ["L1-1", "L1-2"]
    assert not {"L1-1", "L1-2"} & (train_ids | val_ids)
    row = train[0]
    assert row["data_source"] == "rubric_rl/generate" and row["ability"] == "kernel/cpu"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["reward_model"]["style"] == "rule"
    task = {t.id: t for t in load_tasks(task_file)}[row["extra_info"]["task_id"]]
    assert row["reward_model"]["ground_truth"] == task.code and task.code.strip() in row["prompt"][1]["content"]
    assert row["extra_info"]["skill"] == "generate" and row["extra_info"]["split"] == "train"
    assert row["extra_info"]["prior_program"] is None
    assert manifest["counts"]["by_skill"]["train"] == {"generate": len(train)}
    assert manifest["counts"]["by_level"]["val"] == {"none": len(val)}
    assert manifest["skills"]["generate"]["version"] == 1
    assert json.loads((tmp_path / "d" / "dataset.json").read_text()) == manifest


def test_allow_eval_tasks_keeps_them(task_file, tmp_path):
    manifest = build_dataset(load_tasks(task_file), DatasetConfig(allow_eval_tasks=True), tmp_path)
    assert manifest["excluded_eval_tasks"] == []
    assert sum(manifest["counts"]["by_level"][s].get("1", 0) for s in ("train", "val")) == 2


def test_split_depends_only_on_the_task_and_seed():
    ids = [f"T-{i}" for i in range(200)]
    split = task_split(ids, 0.2, seed=3)
    assert 20 <= sum(s == "val" for s in split.values()) <= 60
    subset = task_split(ids[:50] + ["X-1"], 0.2, seed=3)
    assert all(subset[t] == split[t] for t in ids[:50])
    assert task_split(ids, 0.2, seed=4) != split
    assert set(task_split(["a", "b"], 0.01, seed=0).values()) == {"train", "val"}  # val never left empty
    assert set(task_split(["a", "b"], 0.0, seed=0).values()) == {"train"}


def _v(status: str, **fields) -> Verdict:
    return Verdict.model_validate(verdict(status, **fields))


REFINE_CASES = [
    ("incorrect", _v("incorrect"), "incorrect"),
    ("compile error", _v("compile_error", compile_log="error: x"), "compile_error"),
    ("hack", _v("hack"), "hack"),
    ("timeout", _v("timeout"), "timeout"),
    ("correct, slower than compile", _v("correct", speedup_eager=1.5, speedup_compile=0.7), "slow against compile"),
    ("correct, faster than compile", _v("correct", speedup_eager=3.0, speedup_compile=1.2), None),
    ("correct, not timed", _v("correct"), None),
    ("evaluator failed", _v("runtime_error", infra_error="GPU lost"), None),
]


@pytest.mark.parametrize(("name", "v", "reason"), REFINE_CASES, ids=[c[0] for c in REFINE_CASES])
def test_which_programs_make_refine_rows(name, v, reason):
    assert refine_reason(v, DatasetConfig()) == reason


def write_verdicts(path: Path, rows: list[tuple[int, str, dict]]) -> Path:
    path.write_text(
        "".join(json.dumps({"task_id": f"T-{t}", "program": program(tag), "verdict": v}) + "\n" for t, tag, v in rows)
    )
    return path


def test_refine_rows_carry_the_prior_program_and_its_feedback(task_file, tmp_path):
    bad = verdict("incorrect", trials=[{"index": 0, "distribution": "task", "seed": 1, "passed": False,
                                        "max_abs_error": 2.5, "mismatched": 3, "numel": 128}])  # fmt: skip
    verdicts = write_verdicts(
        tmp_path / "v.jsonl",
        [
            (0, "a", bad),
            (0, "a", bad),  # the same program again
            (1, "b", verdict("correct", speedup_eager=2.0, speedup_compile=2.0)),  # nothing to refine
            (2, "c", verdict("runtime_error", infra_error="lost", errors=["lost"])),
            (9, "d", verdict("compile_error", compile_log="candidate line 3: error: y")),
            (77, "e", verdict("incorrect")),  # no such task
        ],
    )
    evaluated = read_verdicts_file(verdicts)
    cfg = DatasetConfig(skills=["generate", "refine"], val_fraction=0.0)
    manifest = build_dataset(load_tasks(task_file), cfg, tmp_path / "d", evaluated=evaluated)
    rows = read_rows(tmp_path / "d" / "train.parquet")
    refine = [r for r in rows if r["extra_info"]["skill"] == "refine"]
    assert sorted(r["extra_info"]["task_id"] for r in refine) == ["T-0", "T-9"]
    dropped = {k: v for k, v in manifest["dropped"].items() if v}
    assert dropped == {"duplicate_program": 1, "evaluator_failed": 1, "nothing_to_refine": 1, "unknown_task": 1}
    first = next(r for r in refine if r["extra_info"]["task_id"] == "T-0")
    info = first["extra_info"]
    assert info["prior_program"] == program("a") and info["prior_status"] == "incorrect"
    assert info["feedback"] == render_feedback(Verdict.model_validate(bad))
    assert "max absolute error 2.5" in info["feedback"] and info["feedback"] in first["prompt"][1]["content"]
    assert program("a").strip() in first["prompt"][1]["content"]
    assert first["data_source"] == "rubric_rl/refine"
    assert manifest["counts"]["by_skill"]["train"] == {"generate": 12, "refine": 2}


def test_refine_without_evaluations_is_refused(task_file, tmp_path):
    with pytest.raises(ValueError, match="needs evaluated programs"):
        build_dataset(load_tasks(task_file), DatasetConfig(skills=["refine"]), tmp_path)


def test_over_length_prompts_are_dropped_and_counted_as_verl_would(task_file, tokenizer_dir, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    full = build_dataset(load_tasks(task_file), DatasetConfig(tokenizer=str(tokenizer_dir)), tmp_path / "all")
    lengths = full["token_lengths"]
    assert lengths["n"] == 12 and lengths["min"] < lengths["max"]
    limit = lengths["p50"]
    cfg = DatasetConfig(tokenizer=str(tokenizer_dir), max_prompt_length=limit)
    cut = build_dataset(load_tasks(task_file), cfg, tmp_path / "cut")
    kept = [r for s in ("train", "val") for r in read_rows(tmp_path / "cut" / f"{s}.parquet")]
    assert cut["dropped"]["over_length"] == 12 - len(kept) > 0
    assert all(r["extra_info"]["prompt_tokens"] <= limit for r in kept)
    for r in kept:
        ids = tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True)["input_ids"]
        assert len(ids) == r["extra_info"]["prompt_tokens"]


def test_the_parquet_loads_in_verls_rlhf_dataset(task_file, tokenizer_dir, tmp_path):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    evaluated = read_verdicts_file(write_verdicts(tmp_path / "v.jsonl", [(0, "a", verdict("incorrect"))]))
    cfg = DatasetConfig(skills=["generate", "refine"], tokenizer=str(tokenizer_dir), val_fraction=0.0)
    manifest = build_dataset(load_tasks(task_file), cfg, tmp_path / "d", evaluated=evaluated)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    limit = manifest["token_lengths"]["max"]
    config = OmegaConf.create({"max_prompt_length": limit, "filter_overlong_prompts": True,
                               "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path / "cache")})  # fmt: skip
    ds = RLHFDataset(str(tmp_path / "d" / "train.parquet"), tokenizer, config)
    assert len(ds) == 13  # verl's own length filter keeps every row we measured within the limit
    item = ds[0]
    assert item["raw_prompt"][0]["role"] == "system" and item["data_source"].startswith("rubric_rl/")
    assert item["reward_model"]["ground_truth"].startswith("import torch")
    assert item["extra_info"]["task_id"].startswith("T-")
    config.max_prompt_length = limit - 1
    fewer = RLHFDataset(str(tmp_path / "d" / "train.parquet"), tokenizer, config)
    assert len(fewer) < 13


def test_ledger_reader(make_ledger, tmp_path):
    run = make_ledger([ledger_row(0, "correct", 1.0, "a"), ledger_row(1, "incorrect", -1.0, "b")])
    assert [r.task_id for r in read_ledger(run)] == ["T-0", "T-1"]
    assert read_ledger(run / "ledger.jsonl")[0].judgment.total == 0.5
    with (run / "ledger.jsonl").open("a") as f:
        f.write('{"task_id": "T-2", "verd')  # a crash mid-row
    assert len(read_ledger(run)) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ledger_row(0, "correct", 1.0, "a") | {"verdict": {"status": "great"}}) + "\n")
    with pytest.raises(LedgerError, match=r"bad.jsonl:1: verdict: status"):
        read_ledger(bad)


def test_cli_build_from_a_ledger(task_file, make_ledger, tokenizer_dir, tmp_path):
    run = make_ledger([ledger_row(3, "incorrect", -1.0, "a"), ledger_row(4, "compile_error", -1.0, "b")])
    out = tmp_path / "ds"
    args = ["skills", "build", "--tasks", str(task_file), "--skill", "generate", "--skill", "refine",
            "--from-ledger", str(run), "--out", str(out), "--tokenizer", str(tokenizer_dir),
            "--max-prompt-length", "100000", "--backend", "cpu", "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.output)
    assert manifest["sources"]["evaluations"] == {"kind": "ledger", "path": str(run)}
    total = sum(sum(manifest["counts"]["by_skill"][s].values()) for s in ("train", "val"))
    assert total == 14 and manifest["dropped"]["over_length"] == 0
    assert (out / "train.parquet").exists() and (out / "val.parquet").exists()


CLI_ERRORS = [
    (["--from-ledger", "x", "--bootstrap"], "at most one of"),
    (["--max-prompt-length", "10"], "max_prompt_length: needs a tokenizer"),
    (["--skill", "refine"], "needs evaluated programs"),
    (["--skill", "nope"], "no bundled skills entry"),
]


@pytest.mark.parametrize(("extra", "message"), CLI_ERRORS, ids=[c[1] for c in CLI_ERRORS])
def test_cli_build_usage_errors(task_file, tmp_path, extra, message):
    result = runner.invoke(app, ["skills", "build", "--tasks", str(task_file), "--out", str(tmp_path), *extra])
    assert result.exit_code == 2 and message in result.output
