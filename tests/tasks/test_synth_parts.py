"""Task synthesis, piece by piece: the seed table, the composer, the similarity index, the LLM screen."""

from __future__ import annotations

import ast
import importlib
import random

import pytest

from rubric_rl.tasks.similarity import SimilarityIndex, code_similarity, copies_reference, operator_sequence
from rubric_rl.tasks.synth import compose, extract_task_program, load_seed_table, render, screen_program
from rubric_rl.tasks.synth.ops import SeedTableError, evaluate
from rubric_rl.tasks.task import check_reference_source


def test_bundled_table_loads_and_every_source_exists():
    table = load_seed_table()
    assert len(table.ops) >= 80 and set(table.profiles) == {"cpu", "cuda"}
    families = {op.family for op in table.ops}
    assert {"attention", "mlp", "rotary", "norm", "conv", "linear"} <= families
    checked = 0
    for op in table.ops:
        module_name, _, attr = op.source.rpartition(".")
        while module_name:
            try:
                obj = importlib.import_module(module_name)
                break
            except ImportError:
                module_name, _, parent = module_name.rpartition(".")
                attr = f"{parent}.{attr}"
        if op.source.startswith("transformers.") and module_name in ("", "transformers"):
            continue  # transformers not installed here: its sources cannot be checked
        for part in attr.split("."):
            obj = getattr(obj, part)
        checked += 1
    assert checked >= len(table.ops) - 6


RULES = [
    ("(H + 2 * pad - k) // stride + 1", {"H": 32, "pad": 1, "k": 3, "stride": 2}, 16),
    ("C % g == 0 and C > g", {"C": 16, "g": 4}, True),
    ("max(a, b) ** 2", {"a": 2, "b": 3}, 9),
    ("-x", {"x": 2}, -2),
    (7, {}, 7),
]


@pytest.mark.parametrize(("rule", "names", "value"), RULES, ids=[str(r[0]) for r in RULES])
def test_rules_evaluate(rule, names, value):
    assert evaluate(rule, names) == value


@pytest.mark.parametrize("rule", ["__import__('os')", "x.real", "[1][0]", "open('f')", "lambda: 1"])
def test_rules_are_data_not_code(rule):
    with pytest.raises((ValueError, NameError, SyntaxError)):
        evaluate(rule, {"x": 1})


def test_a_bad_table_fails_naming_the_op(tmp_path):
    text = load_seed_table().model_dump(exclude={"digest"})
    text["ops"][0]["forward"] = "{x} = torch.relu({nope})"
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(text))
    with pytest.raises(SeedTableError, match=r"op 'relu': forward: placeholder \{nope\}"):
        load_seed_table(path)


def test_compositions_are_reproducible_well_formed_and_in_range():
    table = load_seed_table()
    sizes = set()
    for i in range(200):
        rng = random.Random(f"7:{i}")
        n = rng.randint(2, 5)
        comp = compose(table, "cpu", rng, n)
        assert comp is not None and len(comp.ops) == n
        code = render(table, comp)
        check_reference_source(code, f"candidate {i}")
        rng2 = random.Random(f"7:{i}")
        assert render(table, compose(table, "cpu", rng2, rng2.randint(2, 5))) == code
        sizes.add(n)
    assert sizes == {2, 3, 4, 5}


def test_constructor_arguments_are_the_sizes_init_uses():
    table = load_seed_table()
    comp = None
    for i in range(500):
        comp = compose(table, "cpu", random.Random(i), 2)
        if comp.ops[0] == "conv2d":
            break
    assert comp is not None and comp.ops[0] == "conv2d"
    code = render(table, comp)
    assert "def __init__(self, in_channels, out_channels, kernel_size" in code
    assert "return [in_channels, out_channels, kernel_size" in code
    assert "torch.randn(batch_size, in_channels, height, width)" in code


KB_PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Conv, ReLU and a bias."""
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
'''

DISGUISED = """import torch
import torch.nn as nn

kernel_size = 3
bias_shape = (out_channels, 1, 1)
batch_size = 128
out_channels = 16
height, width = 32, 32
in_channels = 3

class Model(nn.Module):
    def __init__(self, c_in, c_out, k, b_shape):
        super(Model, self).__init__()
        self.convolution = nn.Conv2d(c_in, c_out, k)
        self.offset = nn.Parameter(torch.randn(b_shape))

    def forward(self, inp):
        inp = self.convolution(inp)
        inp = torch.relu(inp)
        inp = inp + self.offset
        return inp

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]
"""


def test_a_renamed_and_reordered_problem_is_found():
    other = KB_PROBLEM.replace("torch.relu(x)", "torch.sigmoid(x) * x").replace("Conv2d", "ConvTranspose2d")
    index = SimilarityIndex([("L2-1", "1_Conv2d_ReLU_BiasAdd", KB_PROBLEM), ("L2-9", "other", other)])
    nearest = index.nearest(DISGUISED)
    assert nearest.task_id == "L2-1" and nearest.code_task_id == "L2-1"
    assert nearest.code_similarity >= 0.85 and nearest.op_similarity == 1.0
    assert operator_sequence(DISGUISED) == ["conv2d", "relu", "add"]


class _Rename(ast.NodeTransformer):
    """Every name the program binds, and every attribute it sets on self, gets a new name."""

    def __init__(self, bound: set[str], attrs: set[str]) -> None:
        self.bound, self.attrs = bound, attrs

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.bound:
            node.id = f"{node.id}_renamed"
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        if node.arg in self.bound and node.arg != "self":
            node.arg = f"{node.arg}_renamed"
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.attrs:
            node.attr = f"my_{node.attr}"
        return node


def disguise(code: str) -> str:
    """Variables renamed; module-level constants moved above the class, in reverse order; the two input
    functions swapped."""
    tree = ast.parse(code)
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    attrs = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and getattr(n.value, "id", None) == "self"
    }
    tree = _Rename(bound - {"self"}, attrs).visit(tree)
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    consts = [s for s in tree.body if isinstance(s, ast.Assign)]
    funcs = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    rest = [s for s in tree.body if s not in imports + consts + funcs]
    tree.body = imports + consts[::-1] + rest + funcs[::-1]
    return ast.unparse(tree)


def test_disguised_kernelbench_problems_are_caught(problems_file):
    from rubric_rl.tasks import load_tasks

    tasks = load_tasks(problems_file)
    index = SimilarityIndex([(t.id, t.name, t.code) for t in tasks])
    sample = [t for t in tasks if t.level in (1, 2)][::5]
    for t in sample:
        disguised = disguise(t.code)
        assert disguised != t.code
        nearest = index.nearest(disguised)
        assert nearest.code_similarity == 1.0, (t.id, nearest)  # renaming and reordering change nothing
        assert index.nearest(disguised).code_task_id is not None


def test_copy_of_the_reference():
    copy = KB_PROBLEM.replace("Model", "ModelNew").replace("x", "y")
    assert copies_reference(KB_PROBLEM, copy, 0.9) == (True, 1.0)
    assert not copies_reference(KB_PROBLEM, "class ModelNew:\n    pass\n", 0.9)[0]
    assert code_similarity(KB_PROBLEM, DISGUISED) > 0.85


SCREEN = [
    ("fine", "import torch\nimport torch.nn as nn\nimport math\nx = math.pi\n", None),
    ("os import", "import os\n", "imports os"),
    ("from subprocess", "from subprocess import run\n", "imports subprocess"),
    ("open", "import torch\nf = open('x')\n", "uses open"),
    ("dunder", "import torch\nt = torch.__class__.__subclasses__()\n", "touches __subclasses__"),
    ("eval", "y = eval('1')\n", "uses eval"),
    ("syntax", "def (:\n", "does not parse"),
]


@pytest.mark.parametrize(("name", "code", "why"), SCREEN, ids=[s[0] for s in SCREEN])
def test_llm_programs_are_screened(name, code, why):
    result = screen_program(code)
    assert (result is None) if why is None else (why in result)


def test_task_program_extraction():
    program, why = extract_task_program(f"Sure.\n```python\n{KB_PROBLEM}```\nDone.")
    assert program is not None and why is None
    assert extract_task_program("```python\nclass Model: pass\n```")[1].endswith("get_inputs, get_init_inputs()")
    assert extract_task_program("")[0] is None


def test_cuda_profile_programs_have_consistent_shapes_on_the_meta_device():
    """The realistic (cuda) sizes are too large to run here; on the meta device shapes are checked, not values."""
    import torch

    table = load_seed_table()
    for i in range(100):
        rng = random.Random(f"0:{i}")
        comp = compose(table, "cuda", rng, rng.randint(2, 5))
        ns: dict = {}
        exec(render(table, comp), ns)
        with torch.device("meta"):
            model = ns["Model"](*ns["get_init_inputs"]())
            out = model(*ns["get_inputs"]())
        assert out.dim() >= 2, comp.ops
        assert sum(p.numel() for p in model.parameters()) <= table.profiles["cuda"].max_params * len(comp.ops)
