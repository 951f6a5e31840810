import json

import pytest
from stub_server import Reply
from typer.testing import CliRunner

from rubric_rl.cli import app


@pytest.fixture
def files(tmp_path, fused_reference, fused_candidate):
    (tmp_path / "ref.py").write_text(fused_reference)
    (tmp_path / "cand.py").write_text(fused_candidate)
    return tmp_path


def _invoke(*args):
    return CliRunner().invoke(app, ["judge", *map(str, args)])


def test_offline_by_default_prints_a_labelled_table(files):
    result = _invoke(files / "ref.py", files / "cand.py", "--backend", "cpu")
    assert result.exit_code == 0, result.output
    for text in ("anti_hacking", "skill_compliance", "total", "gates fired", "heuristic", "stitchcuda v1"):
        assert text in result.output


def test_json_output_and_out_file(files):
    out = files / "judgment.json"
    result = _invoke(
        files / "ref.py",
        files / "cand.py",
        "--offline",
        "--json",
        "--out",
        out,
        "--rubric",
        "judges/anti_hacking_strict.yaml",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["identity"]["kind"] == "heuristic" and data["identity"]["rubric"] == "anti_hacking_strict"
    assert json.loads(out.read_text()) == data


def test_llm_endpoint(files, stub_server, tmp_path):
    stub_server.responder = lambda request: Reply(
        content=json.dumps(
            {
                "dimensions": {
                    d: {"rationale": "ok", "score": 4}
                    for d in ("anti_hacking", "cuda_engineering", "operator_coverage", "skill_compliance")
                },
                "flags": {"major_hacking": False},
            }
        )
    )
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"cache_path: {tmp_path / 'cache.sqlite3'}\nmax_retries: 0\n")
    result = _invoke(
        files / "ref.py", files / "cand.py", "--base-url", stub_server.url, "--model", "stub", "--config", cfg, "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["identity"]["kind"] == "llm" and data["total"] == 0.75 and stub_server.request_count == 1


def test_failed_judge_still_exits_zero_with_a_warning(files, stub_server, tmp_path):
    stub_server.responder = lambda request: Reply(status=500)
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"cache_path: {tmp_path / 'cache.sqlite3'}\nmax_retries: 0\n")
    result = _invoke(
        files / "ref.py", files / "cand.py", "--base-url", stub_server.url, "--model", "stub", "--config", cfg
    )
    assert result.exit_code == 0
    assert "judge_failed" in result.output and "neutral fallback" in result.output


def test_refine_with_feedback_and_verdict(files, make_verdict):
    (files / "fb.txt").write_text("runtime.aten_fallback: aten::add")
    (files / "v.json").write_text(make_verdict("correct", aten_ops={"empty_like": 1}).model_dump_json())
    result = _invoke(
        files / "ref.py",
        files / "cand.py",
        "--skill",
        "refine",
        "--feedback",
        files / "fb.txt",
        "--verdict",
        files / "v.json",
        "--rubric",
        "stitchcuda_refine",
        "--json",
        "--backend",
        "cpu",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["skill"] == "refine" and data["verdict_status"] == "correct"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rubric", "nope"], "no bundled judges entry"),
        (["--skill", "refine"], "feedback"),
        (["--offline", "--base-url", "http://127.0.0.1:9/v1"], "exclude each other"),
        (["--model", "m"], "base_url"),
        (["--samples", "0"], "samples"),
        (["--rubric", "stitchcuda_refine"], "judges skills"),
        (["--verdict", "missing.json"], "does not exist"),
        (["--backend", "tpu"], "cuda or cpu"),
    ],
)
def test_bad_usage_exits_2(files, extra, message):
    result = _invoke(files / "ref.py", files / "cand.py", *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_bad_verdict_names_the_field(files):
    (files / "v.json").write_text(json.dumps({"status": "great"}))
    result = _invoke(files / "ref.py", files / "cand.py", "--verdict", files / "v.json")
    assert result.exit_code == 2 and "not a Verdict: field status" in result.output
