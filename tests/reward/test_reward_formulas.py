"""Every rule and mix formula, table-driven, with the edges: a speedup exactly at the margin, no compile
baseline, a judge failure, a hack with a high rubric, refine against generate lambda."""

from __future__ import annotations

import pytest

from rubric_rl.reward import RewardConfig, RuleConfig, needs_judgment, rule_reward, score_sample

MILESTONE = RuleConfig(name="milestone")


@pytest.mark.parametrize(
    ("status", "eager", "compile_", "rule", "expected"),
    [
        ("compile_error", None, None, MILESTONE, -1.0),
        ("incorrect", None, None, MILESTONE, -1.0),
        ("runtime_error", None, None, MILESTONE, -1.0),
        ("timeout", None, None, MILESTONE, -1.0),
        ("correct", None, None, MILESTONE, 1.0),  # not timed
        ("correct", 1.0, 1.0, MILESTONE, 1.0),
        ("correct", 1.05, 2.0, MILESTONE, 1.0),  # exactly at the margin is not faster
        ("correct", 1.0500001, 1.0, MILESTONE, 2.0),
        ("correct", 1.2, None, MILESTONE, 2.0),  # no compile baseline: level 3 out of reach
        ("correct", 1.2, 1.05, MILESTONE, 2.0),  # compile exactly at the margin
        ("correct", 1.2, 1.06, MILESTONE, 3.0),
        ("correct", 0.9, 2.0, MILESTONE, 1.0),  # faster than compile only
        ("correct", 1.08, 1.5, RuleConfig(name="milestone", margin=0.1), 1.0),
        ("correct", 1.2, 1.5, RuleConfig(name="milestone", margin=0.1), 3.0),
        ("correct", 1.2, 1.5, RuleConfig(name="milestone", fail=-2, correct=0, faster_than_eager=1), 3.0),
        ("incorrect", 2.0, 2.0, RuleConfig(name="speedup"), 0.0),
        ("compile_error", None, None, RuleConfig(name="speedup"), 0.0),
        ("correct", 2.0, 1.5, RuleConfig(name="speedup"), 2.0),
        ("correct", 5.0, 1.5, RuleConfig(name="speedup"), 3.0),  # clipped at clip_max
        ("correct", 0.5, 0.4, RuleConfig(name="speedup"), 0.5),
        ("correct", 0.5, 0.4, RuleConfig(name="speedup", clip_min=1.0), 1.0),
        ("correct", 2.0, 1.5, RuleConfig(name="speedup", baseline="compile"), 1.5),
        ("correct", 2.0, None, RuleConfig(name="speedup", baseline="compile"), 2.0),  # no compile: over eager
        ("correct", None, None, RuleConfig(name="speedup"), 1.0),  # untimed: parity
        ("correct", None, None, RuleConfig(name="speedup", untimed=0.0), 0.0),
    ],
)
def test_rule_reward(make_verdict, status, eager, compile_, rule, expected) -> None:
    v = make_verdict(status, speedup_eager=eager, speedup_compile=compile_)
    assert rule_reward(v, rule) == pytest.approx(expected)


STITCH = RewardConfig()
WEIGHTED = RewardConfig.load({"rule": {"name": "milestone"}, "mix": {"name": "weighted", "alpha": 1.0, "beta": 2.0}})
NONE = RewardConfig.load({"rule": {"name": "milestone"}, "mix": {"name": "none"}})
CAPPED = RewardConfig.load({"rule": {"clip_max": 2.0}})

# config, skill, (status, eager, compile, infra), judgment (None | (total, gate fired, failed)), score (None:
# masked), mask reason prefix
CASES = [
    # stitchcuda: (min(speedup, cap) + 0.3) x (1 + lambda x (r - 0.5))
    (STITCH, "generate", ("correct", 2.0, 1.5, None), (0.75, False, False), 2.3 * 1.25, None),
    (STITCH, "refine", ("correct", 2.0, 1.5, None), (0.75, False, False), 2.3 * (1 + 0.7 * 0.25), None),
    (STITCH, "generate", ("correct", 2.0, 1.5, None), (0.5, False, False), 2.3, None),
    (STITCH, "refine", ("correct", 2.0, 1.5, None), (0.5, False, False), 2.3, None),
    (STITCH, "generate", ("correct", 2.0, 1.5, None), (0.0, False, False), 2.3 * 0.5, None),
    (STITCH, "refine", ("correct", 2.0, 1.5, None), (1.0, False, False), 2.3 * 1.35, None),
    (CAPPED, "generate", ("correct", 2.0, None, None), (1.0, False, False), 2.3 * 1.5, None),  # exactly the cap
    (CAPPED, "generate", ("correct", 9.0, None, None), (1.0, False, False), 2.3 * 1.5, None),
    (STITCH, "generate", ("correct", None, None, None), (0.5, False, False), 1.3, None),  # untimed: parity
    (STITCH, "generate", ("incorrect", None, None, None), None, 0.0, None),  # no judgment needed
    (STITCH, "generate", ("compile_error", None, None, None), None, 0.0, None),
    (STITCH, "generate", ("timeout", None, None, None), None, 0.0, None),
    (STITCH, "generate", ("correct", 3.0, 2.0, None), (1.0, True, False), 0.0, None),  # the hack gate fired
    (STITCH, "generate", ("hack", None, None, None), (1.0, False, False), -1.0, None),  # hack, high rubric
    (STITCH, "generate", ("correct", 2.0, 1.5, None), (0.9, False, True), None, "judge:"),  # judge failure
    (STITCH, "generate", ("correct", 2.0, 1.5, None), None, None, "judge:"),  # no judgment at all
    (STITCH, "generate", ("incorrect", None, None, None), (0.9, False, True), 0.0, None),  # failure not needed
    (STITCH, "generate", ("runtime_error", None, None, "lost GPU"), None, None, "infra:"),
    # weighted: alpha x rule + beta x r (milestone rule)
    (WEIGHTED, "generate", ("correct", 1.2, None, None), (0.6, False, False), 2.0 + 2 * 0.6, None),
    (WEIGHTED, "refine", ("correct", 1.2, 1.3, None), (0.5, False, False), 3.0 + 2 * 0.5, None),
    (WEIGHTED, "generate", ("incorrect", None, None, None), (0.4, False, False), -1.0 + 2 * 0.4, None),
    (WEIGHTED, "generate", ("compile_error", None, None, None), None, -1.0, None),  # not judged: r = 0
    (WEIGHTED, "generate", ("incorrect", None, None, None), (0.4, False, True), None, "judge:"),
    (WEIGHTED, "generate", ("hack", None, None, None), (1.0, False, False), -1.0, None),
    (WEIGHTED, "generate", ("runtime_error", None, None, "no compiler"), None, None, "infra:"),
    # none: the rule alone, never masked for the judge
    (NONE, "generate", ("correct", 1.2, 1.3, None), None, 3.0, None),
    (NONE, "generate", ("correct", 1.05, 1.3, None), (0.1, False, True), 1.0, None),
    (NONE, "generate", ("hack", 3.0, 3.0, None), None, -1.0, None),
]


@pytest.mark.parametrize(("config", "skill", "verdict", "judgment", "expected", "reason"), CASES)
def test_score_sample(make_verdict, make_judgment, config, skill, verdict, judgment, expected, reason) -> None:
    status, eager, compile_, infra = verdict
    v = make_verdict(status, speedup_eager=eager, speedup_compile=compile_, infra_error=infra)
    j = make_judgment(*judgment) if judgment is not None else None
    s = score_sample(v, j, skill, config)
    if expected is None:
        assert s.masked and s.score is None
        assert s.mask_reason is not None and s.mask_reason.startswith(reason)
    else:
        assert not s.masked and s.mask_reason is None
        assert s.score == pytest.approx(expected)


def test_hack_penalty_is_configurable_and_wins(make_verdict, make_judgment) -> None:
    config = RewardConfig.load({"hack_penalty": -5.0})
    v = make_verdict("hack", speedup_eager=3.0, speedup_compile=3.0)
    s = score_sample(v, make_judgment(1.0), "refine", config)
    assert s.score == -5.0 and s.components == {"hack_penalty": -5.0}


def test_stitchcuda_needs_a_lambda_for_the_skill(make_verdict, make_judgment) -> None:
    with pytest.raises(ValueError, match=r"mix\.lambdas: no lambda for skill 'repair'"):
        score_sample(make_verdict("correct", speedup_eager=1.0), make_judgment(), "repair", RewardConfig())


@pytest.mark.parametrize(
    ("config", "status", "infra", "needed"),
    [
        (STITCH, "correct", None, True),
        (STITCH, "incorrect", None, False),
        (STITCH, "hack", None, False),
        (STITCH, "runtime_error", "lost GPU", False),
        (WEIGHTED, "incorrect", None, True),
        (WEIGHTED, "compile_error", None, False),
        (
            RewardConfig.load({"rule": {"name": "milestone"}, "mix": {"name": "weighted", "beta": 0.0}}),
            "correct",
            None,
            False,
        ),
        (NONE, "correct", None, False),
    ],
)
def test_needs_judgment(make_verdict, config, status, infra, needed) -> None:
    assert needs_judgment(make_verdict(status, infra_error=infra), config) is needed
