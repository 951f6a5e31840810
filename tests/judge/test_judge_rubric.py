import copy

import pytest
import yaml

from rubric_rl.judge import HeuristicJudge, JudgeConfig, RubricError, bundled_rubrics, load_rubric
from rubric_rl.judge.rubric import load_rubric_and_prompt
from rubric_rl.resources import resolve_content

FOUR = ["anti_hacking", "cuda_engineering", "operator_coverage", "skill_compliance"]


def test_bundled_rubrics_load_with_versions_and_hashes():
    rubrics = {load_rubric(p).name: load_rubric(p) for p in bundled_rubrics()}
    assert {"stitchcuda", "stitchcuda_generate", "stitchcuda_refine", "anti_hacking_strict"} <= set(rubrics)
    for name in ("stitchcuda", "stitchcuda_generate", "stitchcuda_refine"):
        assert [d.name for d in rubrics[name].dimensions] == FOUR
        assert rubrics[name].gates[0].name == "major_hacking" and rubrics[name].gates[0].effect == "zero"
    assert rubrics["stitchcuda_generate"].skills == ["generate"]
    assert rubrics["stitchcuda_refine"].skills == ["refine"]
    assert "FEEDBACK" in rubrics["stitchcuda_refine"].dimension("skill_compliance").description
    assert [d.name for d in rubrics["anti_hacking_strict"].dimensions] == ["anti_hacking"]
    hashes = {r.content_hash for r in rubrics.values()}
    assert len(hashes) == len(rubrics) and all(len(h) == 64 for h in hashes)


def test_bundled_names_and_paths_resolve_to_the_same_rubric():
    assert load_rubric("stitchcuda") == load_rubric("judges/stitchcuda.yaml") == load_rubric("stitchcuda.yaml")


def _write(tmp_path, data, name="r.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def base_data():
    return yaml.safe_load(resolve_content("stitchcuda", "judges").read_text())


def _set(data, dotted, value):
    node = data
    keys = dotted.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    if value is _DELETE:
        del node[int(last) if last.isdigit() else last]
    else:
        node[int(last) if last.isdigit() else last] = value


_DELETE = object()

INVALID = [
    ("dimensions.0.weight", -1, r"field dimensions\.0\.weight"),
    ("dimensions.1.levels", {1: "a", 2: "b", 4: "d"}, r"field dimensions\.1\.levels: .*consecutive"),
    ("dimensions.1.levels", {1: "only one"}, r"field dimensions\.1\.levels: .*at least two"),
    ("dimensions.1.name", "anti_hacking", r"dimensions\.1\.name: duplicate dimension name 'anti_hacking'"),
    ("dimensions.0.name", "Anti Hacking", r"field dimensions\.0\.name: .*identifier"),
    ("dimensions.0.wieght", 1.0, r"field dimensions\.0\.wieght: Extra inputs"),
    ("dimensions.0.description", _DELETE, r"field dimensions\.0\.description: Field required"),
    ("version", 0, r"field version"),
    ("dimensions", [], r"field dimensions"),
    ("gates.0.effect", "cap", r"field gates\.0: .*needs a value in `cap`"),
    ("gates.0.score_at_most", {"speed": 1}, r"gates\.0\.score_at_most: unknown dimension 'speed'"),
    ("gates.0.score_at_most", {"anti_hacking": 9}, r"gates\.0\.score_at_most\.anti_hacking: 9 is outside"),
    ("gates.0.verdict_status", ["hacked"], r"field gates\.0\.verdict_status\.0"),
    ("gates.0.name", "anti_hacking", r"gates\.0\.name: 'anti_hacking' is already used"),
]


@pytest.mark.parametrize(("field", "value", "message"), INVALID, ids=[f"{f}={v!r}" for f, v, _ in INVALID])
def test_invalid_rubrics_fail_naming_the_field(tmp_path, base_data, field, value, message):
    data = copy.deepcopy(base_data)
    _set(data, field, value)
    with pytest.raises(RubricError, match=message):
        load_rubric(_write(tmp_path, data))


def test_all_zero_weights_are_rejected(tmp_path, base_data):
    for d in base_data["dimensions"]:
        d["weight"] = 0
    with pytest.raises(RubricError, match="at least one dimension needs a positive weight"):
        load_rubric(_write(tmp_path, base_data))


def test_a_gate_needs_a_trigger(tmp_path, base_data):
    base_data["gates"] = [{"name": "g", "description": "never", "effect": "zero"}]
    with pytest.raises(RubricError, match=r"field gates\.0: a gate needs a trigger"):
        load_rubric(_write(tmp_path, base_data))


def test_not_yaml_and_missing_files(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dimensions: [unclosed")
    with pytest.raises(RubricError, match="not valid YAML"):
        load_rubric(bad)
    with pytest.raises(RubricError, match="bundled"):
        load_rubric("no-such-rubric")


def test_a_rubric_next_to_its_own_prompt_uses_it(tmp_path, base_data):
    _, prompt = load_rubric_and_prompt("stitchcuda")
    own = prompt.model_dump() | {"name": "mine", "user": prompt.user + "\nBe brief."}
    (tmp_path / "my_prompt.yaml").write_text(yaml.safe_dump(own))
    base_data["prompt"] = "my_prompt.yaml"
    rubric, loaded = load_rubric_and_prompt(_write(tmp_path, base_data))
    assert loaded.name == "mine" and rubric.prompt == "my_prompt.yaml"


def test_unknown_prompt_placeholder_fails_naming_the_field(tmp_path, base_data):
    _, prompt = load_rubric_and_prompt("stitchcuda")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(prompt.model_dump() | {"user": "$candidate_code"}))
    base_data["prompt"] = "p.yaml"
    with pytest.raises(RubricError, match=r"p\.yaml: field \(top level\): user: placeholder\(s\) \['candidate_code'\]"):
        load_rubric_and_prompt(_write(tmp_path, base_data))


def test_content_hash_ignores_comments_but_not_content(tmp_path, base_data):
    a = load_rubric(_write(tmp_path, base_data, "a.yaml"))
    (tmp_path / "b.yaml").write_text("# a comment\n" + yaml.safe_dump(base_data))
    assert load_rubric(tmp_path / "b.yaml").content_hash == a.content_hash
    base_data["dimensions"][0]["weight"] = 0.5
    assert load_rubric(_write(tmp_path, base_data, "c.yaml")).content_hash != a.content_hash


def test_scale_helpers():
    d = load_rubric("stitchcuda").dimension("anti_hacking")
    assert (d.min_score, d.max_score, d.neutral_score) == (1, 5, 3.0)
    assert d.normalise(1) == 0.0 and d.normalise(5) == 1.0 and d.normalise(3) == 0.5


def test_skill_mismatch_is_refused():
    with pytest.raises(RubricError, match=r"judges skills \['refine'\], not 'generate'"):
        load_rubric("stitchcuda_refine").check_skill("generate")


def test_swapping_the_rubric_is_a_config_change(fused_reference, fused_candidate):
    from rubric_rl.judge import build_request

    request = build_request("generate", fused_reference, fused_candidate, backend="cpu")
    strict = HeuristicJudge(JudgeConfig(offline=True, rubric="anti_hacking_strict")).judge_now(request)
    default = HeuristicJudge(JudgeConfig(offline=True)).judge_now(request)
    assert [d.name for d in strict.dimensions] == ["anti_hacking"]
    assert [d.name for d in default.dimensions] == FOUR
    assert strict.identity.rubric == "anti_hacking_strict"


def test_offline_judge_refuses_a_dimension_it_cannot_score(tmp_path, base_data):
    base_data["dimensions"].append(
        {"name": "readability", "description": "Is it readable?", "weight": 1, "levels": {1: "no", 2: "yes"}}
    )
    rubric = load_rubric(_write(tmp_path, base_data))
    with pytest.raises(RubricError, match=r"dimensions\.4\.heuristic"):
        HeuristicJudge(rubric=rubric)
