import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_example_jsonl_matches_the_programs():
    spec = importlib.util.spec_from_file_location("make_example_jsonl", REPO / "scripts" / "make_example_jsonl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tasks, candidates = module.example_rows()
    on_disk_tasks = [json.loads(x) for x in (REPO / "examples" / "tasks.jsonl").read_text().splitlines()]
    on_disk_cands = [json.loads(x) for x in (REPO / "examples" / "candidates.jsonl").read_text().splitlines()]
    assert on_disk_tasks == tasks, "run: python scripts/make_example_jsonl.py"
    assert on_disk_cands == candidates, "run: python scripts/make_example_jsonl.py"
    assert {c["candidate_id"] for c in candidates} >= {
        "fused_add_relu/correct",
        "fused_add_relu/wrong",
        "fused_add_relu/compile_error",
    }
