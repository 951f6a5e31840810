import pytest

from rubric_rl.tasks import Task, filter_tasks, parse_id_ranges


def task(level: int, pid: int, name: str) -> Task:
    return Task(id=f"L{level}-{pid}", level=level, problem_id=pid, name=name, origin="t", code="")


TASKS = [task(1, 1, "1_Square_matmul"), task(1, 2, "2_Relu"), task(2, 5, "5_Conv_GELU"), task(3, 1, "1_MLP")]


@pytest.mark.parametrize(
    "spec, expected",
    [("1-3", {1, 2, 3}), ("1,5", {1, 5}), ("2-2, 7", {2, 7}), ("", set())],
)
def test_parse_id_ranges(spec, expected):
    assert parse_id_ranges(spec) == expected


@pytest.mark.parametrize("spec", ["a-b", "5-1", "1-"])
def test_parse_id_ranges_rejects(spec):
    with pytest.raises(ValueError, match="bad id range"):
        parse_id_ranges(spec)


@pytest.mark.parametrize(
    "kwargs, ids",
    [
        ({"levels": [1]}, ["L1-1", "L1-2"]),
        ({"ids": "1"}, ["L1-1", "L3-1"]),
        ({"names": ["*relu*"]}, ["L1-2"]),
        ({"names": ["gelu"]}, ["L2-5"]),
        ({"levels": [1, 3], "ids": "1-1"}, ["L1-1", "L3-1"]),
        ({"task_ids": ["L3-1"]}, ["L3-1"]),
        ({}, ["L1-1", "L1-2", "L2-5", "L3-1"]),
    ],
)
def test_filter_tasks(kwargs, ids):
    assert [t.id for t in filter_tasks(TASKS, **kwargs)] == ids
