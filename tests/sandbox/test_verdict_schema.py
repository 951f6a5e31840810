"""Verdicts written under schema 1 (ledgers, verdicts.jsonl of earlier runs) still load, in schema 2's layout."""

from rubric_rl.sandbox import Verdict
from rubric_rl.sandbox.verdict import SCHEMA_VERSION

SCHEMA_1 = {
    "schema_version": 1,
    "status": "correct",
    "task_id": "L1-12",
    "candidate_sha256": "ab" * 32,
    "timings": {
        "timer": "host_sync",
        "candidate": {"n": 3, "median_ms": 1.0, "mean_ms": 1.0, "std_ms": 0.0, "min_ms": 1.0, "max_ms": 1.0,
                      "p10_ms": 1.0, "p90_ms": 1.0},
        "min_timing_s": 0.0,
        "cpu_cores": [14, 15],
        "host_launch_us": 5.2,
        "host_python_us": 0.03,
    },
    "speedup_eager": 1.2,
    "durations": {"total_s": 9.0, "worker": {"setup_s": 1.5, "start_wait_s": 0.0}},
}  # fmt: skip


def test_a_schema_1_verdict_loads_with_its_diagnostics_moved():
    v = Verdict.model_validate(SCHEMA_1)
    assert v.schema_version == SCHEMA_VERSION == 2
    assert v.diagnostics.timing_cores == [14, 15] and v.diagnostics.host_launch_us == 5.2
    assert v.diagnostics.worker_stages == {"setup_s": 1.5, "start_wait_s": 0.0}
    assert v.timings is not None and v.timings.candidate is not None and v.timings.candidate.median_ms == 1.0
    assert v.speedup_eager == 1.2 and v.durations.total_s == 9.0


def test_a_schema_2_verdict_round_trips():
    v = Verdict.model_validate(SCHEMA_1)
    again = Verdict.model_validate_json(v.model_dump_json())
    assert again == v
