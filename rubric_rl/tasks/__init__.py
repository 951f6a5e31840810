"""Tasks: the reference programs, their sources and filters."""

from rubric_rl.tasks.filters import filter_tasks, is_evaluation_task, parse_id_ranges
from rubric_rl.tasks.sources import KERNELBENCH_HF_DATASET, load_tasks
from rubric_rl.tasks.task import Task, TaskError, check_reference_source, make_task

__all__ = [
    "KERNELBENCH_HF_DATASET",
    "Task",
    "TaskError",
    "check_reference_source",
    "filter_tasks",
    "is_evaluation_task",
    "load_tasks",
    "make_task",
    "parse_id_ranges",
]
