"""Which operators of torch.nn and torch.nn.functional the seed table covers, and which it does not.

The seed table (rubric_rl/tasks/synth/seed_ops.yaml) is curated by hand from this enumeration: run it after a
torch upgrade, or before adding operators, to see the candidates left.

    python scripts/seed_ops_coverage.py [--table PATH] [--json]
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging

import torch.nn as nn
import torch.nn.functional as F

from rubric_rl.tasks.synth import load_seed_table

log = logging.getLogger("seed_ops_coverage")


def enumerate_candidates() -> dict[str, list[str]]:
    modules = sorted(
        n for n, obj in vars(nn).items()
        if inspect.isclass(obj) and issubclass(obj, nn.Module) and not n.startswith("_") and n != "Module"
    )  # fmt: skip
    functions = sorted(n for n, obj in vars(F).items() if callable(obj) and not n.startswith("_") and n.islower())
    return {"torch.nn": modules, "torch.nn.functional": functions}


def coverage(table_path: str | None) -> dict[str, dict[str, list[str]]]:
    table = load_seed_table(table_path)
    used = {op.source for op in table.ops}
    report = {}
    for prefix, names in enumerate_candidates().items():
        covered = [n for n in names if f"{prefix}.{n}" in used]
        report[prefix] = {"covered": covered, "not_covered": [n for n in names if n not in covered]}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default=None, help="Seed table (default: the bundled one).")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    report = coverage(args.table)
    if args.json:
        log.info(json.dumps(report, indent=2))
        return
    for prefix, part in report.items():
        total = len(part["covered"]) + len(part["not_covered"])
        log.info("%s: %d of %d covered directly", prefix, len(part["covered"]), total)
        log.info("  not covered: %s", ", ".join(part["not_covered"]))


if __name__ == "__main__":
    main()
