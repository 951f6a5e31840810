import json

import pytest

from rubric_rl.judge import answer_schema, load_rubric, parse_answer

RUBRIC = load_rubric("stitchcuda")
DIMS = [d.name for d in RUBRIC.dimensions]


def _answer(scores=None, flags=None, drop=(), extra=None, rationale="evidence", **entry_overrides):
    dims = {n: {"rationale": rationale, "score": (scores or {}).get(n, 4)} for n in DIMS if n not in drop}
    for name, entry in entry_overrides.items():
        dims[name] = entry
    body = {"dimensions": dims, "flags": {"major_hacking": False} if flags is None else flags}
    if extra:
        body.update(extra)
    return json.dumps(body)


GOOD = _answer()

CASES = [
    # (id, text, error_code or None)
    ("well_formed", GOOD, None),
    ("fenced_json", f"```json\n{GOOD}\n```", None),
    ("bare_fence", f"```\n{GOOD}\n```", None),
    ("after_thinking", f"<think>the kernel uses shared memory... score 5?</think>\n{GOOD}", None),
    ("integral_float_score", _answer(scores={"anti_hacking": 3.0}), None),
    ("extra_top_level_key_ignored", _answer(extra={"summary": "fine"}), None),
    ("empty", "", "empty"),
    ("whitespace", "   \n", "empty"),
    ("only_thinking", "<think>hmm</think>", "empty"),
    ("prose", "The candidate is good. I would give it a 4.", "not_json"),
    ("prose_around_json", f"Here is my evaluation: {GOOD}", "not_json"),
    ("truncated_json", GOOD[:-7], "not_json"),
    ("two_fences", f"```json\n{GOOD}\n```\n```json\n{GOOD}\n```", "not_json"),
    ("json_array", "[1, 2, 3]", "not_object"),
    ("dimensions_not_object", json.dumps({"dimensions": [4, 4, 4, 4], "flags": {}}), "not_object"),
    ("missing_dimension", _answer(drop=("operator_coverage",)), "missing_dimension"),
    ("unknown_dimension", _answer(speed={"rationale": "fast", "score": 5}), "unknown_dimension"),
    ("flat_score", _answer(anti_hacking=5), "bad_score"),
    ("score_missing", _answer(anti_hacking={"rationale": "x"}), "bad_score"),
    ("score_string", _answer(scores={"anti_hacking": "4"}), "bad_score"),
    ("score_fraction", _answer(scores={"anti_hacking": 4.5}), "bad_score"),
    ("score_bool", _answer(scores={"anti_hacking": True}), "bad_score"),
    ("score_high", _answer(scores={"cuda_engineering": 6}), "out_of_range"),
    ("score_zero", _answer(scores={"cuda_engineering": 0}), "out_of_range"),
    ("score_negative", _answer(scores={"skill_compliance": -1}), "out_of_range"),
    ("rationale_empty", _answer(rationale="  "), "bad_rationale"),
    ("rationale_missing", _answer(anti_hacking={"score": 3}), "bad_rationale"),
    ("flags_missing", json.dumps({"dimensions": json.loads(GOOD)["dimensions"]}), "missing_flag"),
    ("flag_missing", _answer(flags={}), "missing_flag"),
    ("flag_not_bool", _answer(flags={"major_hacking": "no"}), "bad_flag"),
    ("flag_unknown", _answer(flags={"major_hacking": False, "minor_hacking": True}), "unknown_flag"),
]


@pytest.mark.parametrize(("text", "code"), [(t, c) for _, t, c in CASES], ids=[i for i, _, _ in CASES])
def test_parse_answer(text, code):
    result = parse_answer(text, RUBRIC)
    assert result.error_code == code, result.error
    if code is None:
        assert result.ok and set(result.answer.scores) == set(DIMS)
        assert all(isinstance(v, int) for v in result.answer.scores.values())
        assert result.answer.flags == {"major_hacking": False}
    else:
        assert not result.ok and result.error


def test_none_content_is_empty():
    assert parse_answer(None, RUBRIC).error_code == "empty"


def test_errors_name_the_dimension_and_range():
    result = parse_answer(_answer(scores={"cuda_engineering": 7}), RUBRIC)
    assert result.error == "cuda_engineering: score 7 is outside 1..5"
    assert "operator_coverage" in parse_answer(_answer(drop=("operator_coverage",)), RUBRIC).error


def test_long_rationales_are_bounded():
    result = parse_answer(_answer(rationale="x" * 10_000), RUBRIC)
    assert result.ok and all(len(r) == 2000 for r in result.answer.rationales.values())


def test_schema_matches_the_rubric():
    schema = answer_schema(RUBRIC)
    dims = schema["properties"]["dimensions"]
    assert dims["required"] == DIMS and dims["additionalProperties"] is False
    assert dims["properties"]["anti_hacking"]["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert dims["properties"]["anti_hacking"]["required"] == ["rationale", "score"]  # reason first
    assert schema["properties"]["flags"]["required"] == ["major_hacking"]
    assert schema["required"] == ["dimensions", "flags"]


def test_rubric_without_flag_gates_needs_no_flags(tmp_path):
    import yaml

    from rubric_rl.resources import resolve_content

    data = yaml.safe_load(resolve_content("stitchcuda", "judges").read_text())
    data["gates"] = []
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    rubric = load_rubric(tmp_path / "r.yaml")
    assert "flags" not in answer_schema(rubric)["properties"]
    text = json.dumps({"dimensions": json.loads(GOOD)["dimensions"]})
    assert parse_answer(text, rubric).ok
