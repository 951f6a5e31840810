import pytest

from rubric_rl.skills import SkillCardError, bundled_skills, load_skill


def test_bundled_cards_load_and_render():
    names = {load_skill(p).name for p in bundled_skills()}
    assert {"generate", "refine"} <= names
    gen = load_skill("generate")
    msgs = gen.render(reference="class Model: ...", backend="cuda")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "class Model: ..." in msgs[1]["content"] and "__global__" in msgs[1]["content"]
    assert "$" not in msgs[1]["content"].replace("$$", "")
    cpu = gen.render(reference="class Model: ...", backend="cpu")
    assert "OpenMP" in cpu[1]["content"]


def test_refine_needs_candidate_and_feedback():
    refine = load_skill("refine")
    with pytest.raises(ValueError, match="needs candidate"):
        refine.render(reference="r", backend="cuda", feedback="f")
    msgs = refine.render(reference="r", backend="cuda", candidate="c", feedback="error: x")
    assert "error: x" in msgs[1]["content"]
    assert refine.contract.from_scratch is False


def test_unknown_placeholder_is_rejected_naming_the_field(tmp_path):
    text = tmp_path / "x.yaml"
    base = load_skill("generate").model_dump()
    base["user"] = "Use $candidate please"
    import yaml

    text.write_text(yaml.safe_dump(base))
    with pytest.raises(SkillCardError, match=r"x.yaml: field \(top level\).*placeholder \$candidate"):
        load_skill(text)


def test_missing_card_lists_bundled():
    with pytest.raises(FileNotFoundError, match="bundled"):
        load_skill("no-such-skill")
