import pytest

from rubric_rl.skills import extract_program

PROGRAM = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
OTHER = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"


def fenced(code: str, info: str = "python") -> str:
    return f"```{info}\n{code}```\n"


@pytest.mark.parametrize(
    "response, expected_program, note",
    [
        (f"Here you go:\n{fenced(PROGRAM)}Done.", PROGRAM, None),
        (fenced(PROGRAM, "py"), PROGRAM, None),
        (fenced(PROGRAM, ""), PROGRAM, None),
        (f"<think>first try\n{fenced(OTHER)}</think>\n{fenced(PROGRAM)}", PROGRAM, None),
        (f"reasoning without open tag</think>{fenced(PROGRAM)}", PROGRAM, None),
        (f"The reference:\n{fenced(OTHER)}My version:\n{fenced(PROGRAM)}", PROGRAM, None),
        (f"{fenced(PROGRAM.replace('x', 'y'))}better:\n{fenced(PROGRAM)}", PROGRAM, "2 blocks define ModelNew"),
        (PROGRAM, PROGRAM, "no code fence"),
        (f"```python\n{PROGRAM}", PROGRAM, "not closed"),
        (f"~~~python\n{PROGRAM}~~~\n", PROGRAM, None),
        (f"{fenced(PROGRAM)}<think>afterthought", PROGRAM, "unclosed <think>"),
        (f"```cpp\n__global__ void k() {{}}\n```\n{fenced(PROGRAM)}", PROGRAM, None),
    ],
)
def test_extracts(response, expected_program, note):
    result = extract_program(response)
    assert result.ok, result.error
    assert result.program == expected_program
    if note:
        assert any(note in n for n in result.notes), result.notes


@pytest.mark.parametrize(
    "response, code",
    [
        ("", "empty_response"),
        ("   \n", "empty_response"),
        ("<think>still thinking about it", "unfinished_thinking"),
        ("<think>a</think>   ", "empty_response"),
        ("I cannot help with that.", "no_code"),
        (fenced(OTHER), "no_model_new"),
        (fenced("class ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n"), "syntax_error"),
        ("```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return (x", "unclosed_fence"),
        (fenced("print('hi')\n", "bash"), "no_code"),
    ],
)
def test_says_why(response, code):
    result = extract_program(response)
    assert not result.ok
    assert result.error_code == code
    assert result.error


def test_syntax_error_reports_line():
    result = extract_program(fenced("import torch\nclass ModelNew:\n    def f(self\n"))
    assert result.error_code == "syntax_error"
    assert "line 3" in result.error
