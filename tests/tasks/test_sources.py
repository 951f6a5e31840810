import json
from pathlib import Path

import pytest

from rubric_rl.tasks import TaskError, filter_tasks, load_tasks

GOOD = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def row(level: int, pid: int, name: str = "X", code: str = GOOD) -> dict:
    return {"level": level, "problem_id": pid, "name": f"{pid}_{name}", "code": code}


def test_jsonl_loads_and_ids(tmp_path):
    tasks = load_tasks(write_jsonl(tmp_path / "p.jsonl", [row(1, 1), row(1, 2), row(3, 1)]))
    assert [t.id for t in tasks] == ["L1-1", "L1-2", "L3-1"]
    assert tasks[2].level == 3 and tasks[2].origin.endswith("p.jsonl")


def test_real_problems_file_has_50_level3(problems_file):
    tasks = load_tasks(problems_file)
    assert len(tasks) == 270
    level3 = filter_tasks(tasks, levels=[3])
    assert len(level3) == 50
    assert {t.problem_id for t in level3} == set(range(1, 51))


def test_kernelbench_checkout(tmp_path):
    for level, files in {1: ["1_Relu.py", "2_Gelu.py"], 2: ["1_Conv_Relu.py"]}.items():
        d = tmp_path / "KernelBench" / f"level{level}"
        d.mkdir(parents=True)
        for f in files:
            (d / f).write_text(GOOD)
    tasks = load_tasks(tmp_path)
    assert [(t.id, t.name) for t in tasks] == [("L1-1", "1_Relu"), ("L1-2", "2_Gelu"), ("L2-1", "1_Conv_Relu")]
    assert load_tasks(tmp_path / "KernelBench")[0].id == "L1-1"  # the inner folder works too


def test_hf_dataset_local(tmp_path):
    datasets = pytest.importorskip("datasets")
    repo = tmp_path / "kb"
    (repo / "data").mkdir(parents=True)
    for level in (1, 3):
        ds = datasets.Dataset.from_list([row(level, i) for i in (1, 2)])
        ds.to_parquet(str(repo / "data" / f"level_{level}-00000-of-00001.parquet"))
    (repo / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n"
        "  - split: level_1\n    path: data/level_1-*\n  - split: level_3\n    path: data/level_3-*\n---\n"
    )
    tasks = load_tasks(f"hf:{repo}")
    assert sorted(t.id for t in tasks) == ["L1-1", "L1-2", "L3-1", "L3-2"]
    assert all(t.origin == f"hf:{repo}" for t in tasks)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([row(1, 1), row(1, 1)], "duplicate task id L1-1"),
        ([row(1, 1, code=GOOD.replace("def get_inputs", "def other_inputs"))], "no top-level get_inputs"),
        ([row(1, 1, code=GOOD.replace("class Model", "class Net"))], "no top-level class 'Model'"),
        ([row(1, 1, code="def (:\n")], "does not parse"),
        ([{"level": 1, "name": "x", "code": GOOD}], r"lacks field\(s\) problem_id"),
        ([{"level": "one", "problem_id": 1, "name": "x", "code": GOOD}], "must be integers"),
    ],
)
def test_jsonl_errors_name_the_file(tmp_path, rows, message):
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TaskError, match=message) as e:
        load_tasks(path)
    assert "bad.jsonl" in str(e.value)


def test_bad_json_line_names_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row(1, 1)) + "\n{not json\n")
    with pytest.raises(TaskError, match=r"bad.jsonl:2: not valid JSON"):
        load_tasks(path)


def test_missing_source_and_wrong_kind(tmp_path):
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(tmp_path / "nope.jsonl")
    other = tmp_path / "x.txt"
    other.write_text("")
    with pytest.raises(TaskError, match="not a task source"):
        load_tasks(other)
    with pytest.raises(TaskError, match="no level<N> folders"):
        load_tasks(tmp_path)


def test_kernelbench_bad_file_name_and_missing_function(tmp_path):
    d = tmp_path / "KernelBench" / "level1"
    d.mkdir(parents=True)
    (d / "relu.py").write_text(GOOD)
    with pytest.raises(TaskError, match="relu.py: file name is not"):
        load_tasks(tmp_path)
    (d / "relu.py").unlink()
    (d / "1_Relu.py").write_text(GOOD.replace("def get_init_inputs", "def nope"))
    with pytest.raises(TaskError, match=r"1_Relu.py: .*get_init_inputs"):
        load_tasks(tmp_path)


def test_hf_missing_dataset_is_a_clear_error(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TaskError, match="could not load dataset"):
        load_tasks(f"hf:{tmp_path / 'no-such-dataset'}")
