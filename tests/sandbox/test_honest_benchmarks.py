"""False positives of the static and native rules on every honest candidate in the repository (target: none).

The runtime rules need the GPU and run in ``scripts/bench_throughput.py`` / ``bench_sandbox.py``, whose tables
list any honest candidate flagged ``hack``; here the rules that read the source are checked on all of them.
"""

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rubric_rl.sandbox import Evaluator, SandboxConfig
from rubric_rl.sandbox.build.candidate import as_written
from rubric_rl.sandbox.checks.native import check_native_sources
from rubric_rl.sandbox.checks.static import check_program

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = sorted((REPO / "benchmarks" / "kernelbench").glob("L*-*_*.py"))
SHARED = REPO.parent / "shared" / "kernelbench" / "problems.jsonl"


def _references() -> dict[str, str]:
    if not SHARED.exists():
        return {}
    rows = (json.loads(line) for line in SHARED.read_text().splitlines() if line.strip())
    return {f"L{r['level']}-{r['problem_id']}": r["code"] for r in rows}


def test_no_honest_benchmark_candidate_trips_a_source_rule(tmp_path):
    assert len(CANDIDATES) >= 40
    config = SandboxConfig(backend="cuda", build={"cache_dir": tmp_path / "build"})
    evaluator = Evaluator(config)
    references = _references()

    def errors_of(path: Path) -> list[str]:
        program = path.read_text()
        findings = check_program(program, config, references.get(path.name.split("_", 1)[0]))
        specs, capture_error = evaluator.capture(program)
        assert specs, f"{path.name}: no load_inline captured ({capture_error})"
        for spec in specs:
            findings += check_native_sources(as_written(spec, config, "9.0"), program, config)
        return [f"{path.name}: {f.rule} line {f.line}: {f.message}" for f in findings if f.severity == "error"]

    with ThreadPoolExecutor(2) as pool:
        flagged = [e for errors in pool.map(errors_of, CANDIDATES) for e in errors]
    assert flagged == [], "\n".join(flagged)
