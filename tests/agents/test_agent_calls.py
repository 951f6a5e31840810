import pytest

from rubric_rl.agents import parse_tool_calls
from rubric_rl.agents.calls import ParsedCall


@pytest.mark.parametrize(
    "text, content, expected",
    [
        ("no call here", "no call here", []),
        (
            'Let me check.<tool_call>{"name": "check", "arguments": {}}</tool_call>',
            "Let me check.",
            [("check", {}, None)],
        ),
        (
            '<tool_call>\n{"name": "write_program", "arguments": {"program": "x = 1"}}\n</tool_call>'
            '<tool_call>{"name": "compile", "arguments": {}}</tool_call>',
            "",
            [("write_program", {"program": "x = 1"}, None), ("compile", {}, None)],
        ),
        ('<tool_call>{"name": "check", "arguments": "{}"}</tool_call>', "", [("check", {}, None)]),
        ('<tool_call>{"name": "check"}</tool_call>', "", [("check", {}, None)]),
        ('<tool_call>{"name": "check", "arguments": {</tool_call>', "", [("", None, "not valid JSON")]),
        ('<tool_call>["check"]</tool_call>', "", [("", None, "must be a JSON object")]),
        ('<tool_call>{"arguments": {}}</tool_call>', "", [("", None, "has no 'name'")]),
        ('<tool_call>{"name": "check", "arguments": [1]}</tool_call>', "", [("check", None, "must be a JSON object")]),
        ('<tool_call>{"name": "check", "arguments": "{oops"}</tool_call>', "", [("check", None, "not valid JSON")]),
        ('Done. <tool_call>{"name": "submit", "argu', "Done.", [("", None, "never closed")]),
    ],
)
def test_parse_tool_calls(text: str, content: str, expected: list[tuple[str, dict | None, str | None]]) -> None:
    got_content, calls = parse_tool_calls(text)
    assert got_content == content
    assert [(c.name, c.arguments) for c in calls] == [(n, a) for n, a, _ in expected]
    for c, (_, _, error) in zip(calls, expected, strict=True):
        if error is None:
            assert c.error is None
        else:
            assert c.error is not None and error in c.error


def test_raw_text_of_a_call_is_bounded() -> None:
    _, (call,) = parse_tool_calls("<tool_call>" + "x" * 10_000 + "</tool_call>")
    assert isinstance(call, ParsedCall) and call.error is not None and len(call.raw) == 300
