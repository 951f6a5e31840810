"""SFT export: which ledger rows become conversations, and verl's MultiTurnSFTDataset reads the file."""

from __future__ import annotations

import json

import pytest
from skill_rows import COPY, judgment, ledger_row, reference
from typer.testing import CliRunner

from rubric_rl.cli import app
from rubric_rl.skills.ledger import read_ledger
from rubric_rl.skills.sft import SftConfig, export_sft, reference_from_prompt, sft_records

FINDING = {"rule": "static.torch_compute_call", "severity": "error", "source": "static", "message": "m"}

FILTER_CASES = [
    ("kept", ledger_row(0, "correct", 1.5, "a"), None),
    ("masked", ledger_row(0, "correct", 1.5, "b", masked=True, mask_reason="judge failed"), "masked"),
    ("no program", ledger_row(0, "compile_error", 0.5, "c", program=None), "no_program"),
    ("zero reward", ledger_row(0, "correct", 0.0, "d"), "not_positive"),
    ("hack status", ledger_row(0, "hack", 1.0, "e"), "hack_finding"),
    ("hack finding", ledger_row(0, "correct", 1.0, "f", verdict={"findings": [FINDING]}), "hack_finding"),
    ("judge failed", ledger_row(0, "correct", 1.0, "g", judgment=judgment(failed=True)), "judge_failed"),
    ("incorrect", ledger_row(0, "incorrect", 0.2, "h"), "not_correct"),
    ("copy of the reference", ledger_row(0, "correct", 1.0, "i", program=COPY), "copies_reference"),
]


@pytest.mark.parametrize(("name", "row", "reason"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_each_filter(make_ledger, name, row, reason):
    rows = read_ledger(make_ledger([row]))
    records, dropped = sft_records(rows, SftConfig())
    if reason is None:
        assert len(records) == 1 and not dropped
        messages = records[0]["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]
        assert messages[-1]["content"] == row["response"]
    else:
        assert records == [] and dropped == {reason: 1}


def test_reference_is_read_from_the_prompt():
    row = ledger_row(5, "correct", 1.0, "a")
    assert reference_from_prompt(row["prompt"]).strip() == reference(5).strip()


def test_duplicates_and_per_prompt_limit(make_ledger):
    rows = read_ledger(
        make_ledger(
            [
                ledger_row(0, "correct", 1.0, "a"),
                ledger_row(0, "correct", 1.0, "a"),
                ledger_row(0, "correct", 2.0, "b"),
                ledger_row(1, "correct", 1.0, "c"),
            ]
        )  # fmt: skip
    )
    records, dropped = sft_records(rows, SftConfig(max_per_prompt=1))
    assert sorted((r["task_id"], r["score"]) for r in records) == [("T-0", 2.0), ("T-1", 1.0)]
    assert dropped == {"duplicate": 1, "over_per_prompt_limit": 1}


def test_sft_file_loads_in_verls_multiturn_sft_dataset(make_ledger, tokenizer_dir, tmp_path):
    pytest.importorskip("verl")
    from transformers import AutoTokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    run = make_ledger([ledger_row(i, "correct", 1.0 + i, f"t{i}") for i in range(3)])
    out = tmp_path / "sft.parquet"
    manifest = export_sft(read_ledger(run), SftConfig(), out)
    assert manifest["rows"] == 3 and json.loads((tmp_path / "sft.json").read_text())["rows"] == 3
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    ds = MultiTurnSFTDataset(str(out), tokenizer, {"max_length": 4096, "messages_key": "messages"})
    assert len(ds) == 3
    item = ds[0]
    n = int(item["attention_mask"].sum())
    trained = item["loss_mask"][:n].nonzero().flatten().tolist()
    assert trained, "the assistant turn carries the loss"
    response_ids = tokenizer(ledger_row(2, "correct", 3.0, "t2")["response"], add_special_tokens=False)["input_ids"]
    assert len(trained) == len(response_ids) + 1  # the response and its end-of-turn token, nothing of the prompt
    assert trained == list(range(n - len(trained), n))  # one run to the end: the response and its <|im_end|>


def test_cli_sft(make_ledger, tmp_path):
    run = make_ledger([ledger_row(0, "correct", 1.0, "a"), ledger_row(1, "hack", 1.0, "b")])
    result = runner_invoke(["skills", "sft", "--from-ledger", str(run), "--out", str(tmp_path / "s.parquet"), "--json"])
    manifest = json.loads(result)
    assert manifest["rows"] == 1 and manifest["dropped"] == {"hack_finding": 1}


def runner_invoke(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output
