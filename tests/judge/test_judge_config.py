import pytest
from pydantic import ValidationError

from rubric_rl.judge import ENV_BASE_URL, ENV_MODEL, HeuristicJudge, JudgeConfig, LLMJudge, make_judge


def test_no_endpoint_means_offline():
    cfg = JudgeConfig().resolved(environ={})
    assert cfg.kind == "heuristic" and cfg.base_url is None


def test_endpoint_from_the_environment():
    env = {ENV_BASE_URL: "http://127.0.0.1:9/v1", ENV_MODEL: "judge-7b", "OPENAI_API_KEY": "k"}
    cfg = JudgeConfig().resolved(environ=env)
    assert (cfg.kind, cfg.base_url, cfg.model) == ("llm", "http://127.0.0.1:9/v1", "judge-7b")
    assert cfg.api_key(env) == "k" and cfg.api_key({}) == "EMPTY"
    assert "api_key" not in cfg.model_dump()  # the key is never part of the config
    assert JudgeConfig(model="mine").resolved(environ=env).model == "mine"  # explicit wins
    assert JudgeConfig(offline=True).resolved(environ=env).kind == "heuristic"


@pytest.mark.parametrize(
    ("fields", "env", "message"),
    [
        ({"base_url": "http://127.0.0.1:9/v1"}, {}, "model: the endpoint"),
        ({"model": "m"}, {}, "base_url: model 'm' needs an endpoint"),
        ({}, {ENV_BASE_URL: "http://127.0.0.1:9/v1"}, "model: the endpoint"),
    ],
)
def test_incomplete_endpoints_fail_naming_the_field(fields, env, message):
    with pytest.raises(ValueError, match=message):
        JudgeConfig(**fields).resolved(environ=env)


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"offline": True, "base_url": "http://127.0.0.1:9/v1"}, "offline"),
        ({"samples": 0}, "samples"),
        ({"temperature": -1}, "temperature"),
        ({"concurrency": 0}, "concurrency"),
        ({"structured_output": "xml"}, "structured_output"),
        ({"backoff_initial_s": 5, "backoff_max_s": 1}, "backoff_max_s"),
        ({"api_key": "secret"}, "api_key"),
    ],
)
def test_bad_configs_name_the_field(fields, loc):
    with pytest.raises(ValidationError, match=loc):
        JudgeConfig(**fields)


def test_make_judge_picks_the_implementation(monkeypatch, tmp_path):
    assert isinstance(make_judge(JudgeConfig()), HeuristicJudge)
    monkeypatch.setenv(ENV_BASE_URL, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(ENV_MODEL, "judge")
    judge = make_judge(JudgeConfig(cache_path=tmp_path / "c.sqlite3"))  # no request is made here
    assert isinstance(judge, LLMJudge) and judge.identity.base_url == "http://127.0.0.1:9/v1"
    assert isinstance(make_judge(JudgeConfig(offline=True)), HeuristicJudge)


def test_make_judge_takes_a_rubric_object_or_name(request_, make_verdict):
    from rubric_rl.judge import JudgeRequest, load_rubric

    strict = load_rubric("anti_hacking_strict")
    for rubric in (strict, "anti_hacking_strict", "judges/anti_hacking_strict.yaml"):
        judge = make_judge(JudgeConfig(offline=True), rubric)
        assert judge.rubric.name == "anti_hacking_strict"
    # the batch runner's request: no card, the backend taken from the Verdict
    verdict = make_verdict(
        "correct",
        environment={"backend": "cpu", "torch": "2", "python": "3.11", "device": "cpu", "host": "h", "rubric_rl": "0"},
    )
    request = JudgeRequest(reference=request_.reference, candidate=request_.candidate, verdict=verdict)
    assert request.backend == "cpu" and request.skill == "generate"
    judgment = make_judge(JudgeConfig(offline=True), strict).judge_now(request)
    assert judgment.identity.rubric == "anti_hacking_strict" and not judgment.judge_failed


def test_llm_judge_with_a_rubric_built_in_code_uses_the_bundled_prompt(tmp_path):
    from rubric_rl.judge import Rubric, load_rubric

    rubric = Rubric.model_validate(load_rubric("stitchcuda").model_dump())
    assert rubric.source_dir is None
    cfg = JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", cache_path=tmp_path / "c.sqlite3")
    judge = LLMJudge(cfg, rubric=rubric)
    assert judge.prompt.name == "default"


def test_a_missing_prompt_file_names_the_field(tmp_path):
    import yaml

    from rubric_rl.judge import RubricError, load_rubric
    from rubric_rl.resources import resolve_content

    data = yaml.safe_load(resolve_content("stitchcuda", "judges").read_text()) | {"prompt": "nope.yaml"}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(RubricError, match="field prompt"):
        load_rubric(tmp_path / "r.yaml")
