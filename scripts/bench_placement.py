"""Whether a model's timing level follows where its parameters landed: one process, the parameters of both
models moved to fresh allocations between blocks of timed rounds.

    python scripts/bench_placement.py --task L3-34 --candidate benchmarks/kernelbench/L3-34_vanilla_rnn_hidden.py
        [--problems problems.jsonl | --reference FILE] [--device cuda|cpu] [--placements 6] [--rounds 100]
        [--out runs/bench_placement.json]

KernelBench L3-34's candidate measured 0.897-0.940 ms from one worker process to the next on an H100 and held
within 0.1% inside each, and eager moved on its own: a 2.5% speedup CV that more rounds cannot lower. If each
placement of the parameters here, inside one process, settles at its own level, the level follows where the memory
landed (on an H100, an L2 partition near or far from the SMs) and the timing protocol can average it inside one
evaluation; if the placements agree, the level is the process's own (its address layout: compare
``bench_sandbox.py --set worker_aslr=false``).

The rounds are the sandbox's (``timing.run_rounds``: fresh inputs, L2 flush, device-wide synchronisation, rotating
order), in this process and without the sandbox around them: the candidate's ``load_inline`` builds with torch's
defaults.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchlib import cv, default_problems, fmt, print_table, within_evaluation_cv, write_json


def _fresh_parameters(model, pad: list, size: int) -> None:
    """Move every parameter and buffer to a new allocation, behind a pad of ``size`` bytes kept alive so the
    allocator cannot hand the same blocks back."""
    import torch

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    pad.append(torch.empty(size, dtype=torch.uint8, device=device))
    for module in model.modules():
        for param in module.parameters(recurse=False):
            param.data = param.data.clone()
        for name, buf in module.named_buffers(recurse=False):
            if buf is not None:
                module._buffers[name] = buf.clone()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", help="a task id of --problems")
    source.add_argument("--reference", type=Path, help="a reference program file")
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--placements", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", type=Path, default=Path("runs/bench_placement.json"))
    args = ap.parse_args()
    if args.placements < 2:
        raise SystemExit("--placements: at least 2, to compare them")

    import torch

    from rubric_rl.sandbox.backends import make_backend
    from rubric_rl.sandbox.inputs import clone_inputs, make_inputs
    from rubric_rl.sandbox.timing import run_rounds
    from rubric_rl.sandbox.worker import load_module
    from rubric_rl.tasks import load_tasks

    if args.task:
        tasks = {t.id: t for t in load_tasks(args.problems or default_problems())}
        if args.task not in tasks:
            raise SystemExit(f"--task {args.task!r}: not in the problems file")
        reference_code = tasks[args.task].code
    else:
        reference_code = args.reference.read_text()
    backend = make_backend(args.device)
    backend.setup(memory_fraction=0.9, threads=None)
    reference = load_module("reference", reference_code)
    candidate = load_module("candidate", args.candidate.read_text())
    init = list(reference.get_init_inputs())
    models = {}
    for name, cls in (("eager", reference.Model), ("candidate", candidate.ModelNew)):
        backend.seed(args.seed)
        models[name] = cls(*init).to(backend.device).eval()

    pad: list = []
    rows = []
    with torch.no_grad():
        for p in range(args.placements):
            if p:
                for model in models.values():
                    _fresh_parameters(model, pad, (p * 7919 % 64 + 1) << 20)
            times = run_rounds(
                models,
                make_inputs=lambda r, p=p: make_inputs(
                    reference,
                    seed=args.seed + 10_000 + p * args.rounds + r,
                    device=backend.device,
                    distribution="task",
                    backend_seed=backend.seed,
                ),
                clone=clone_inputs,
                backend=backend,
                n_rounds=args.rounds,
                n_warmup=10,
                checked_rounds=set(),
                on_checked_round=lambda r, outputs: None,
                after_round=lambda outputs: None,
            )
            eager, cand = statistics.median(times["eager"]), statistics.median(times["candidate"])
            rows.append(
                {
                    "placement": p,
                    "eager_median_ms": eager,
                    "candidate_median_ms": cand,
                    "speedup": eager / cand,
                    "within_cv": within_evaluation_cv(times["eager"], times["candidate"]),
                }
            )
            print(f"placement {p}: eager {eager:.4f} ms, candidate {cand:.4f} ms, speedup {eager / cand:.4f}")

    within = [r["within_cv"] for r in rows if r["within_cv"] is not None]
    summary = {
        "eager_cv": cv([r["eager_median_ms"] for r in rows]),
        "candidate_cv": cv([r["candidate_median_ms"] for r in rows]),
        "speedup_cv": cv([r["speedup"] for r in rows]),
        "speedup_median": statistics.median(r["speedup"] for r in rows),
        "within_cv_median": statistics.median(within) if within else None,
    }
    print_table(
        f"{args.placements} placements of the parameters in one process ({args.device}, {args.rounds} rounds each)",
        ["quantity", "CV % across placements"],
        [
            ["eager median", fmt(100 * summary["eager_cv"] if summary["eager_cv"] is not None else None)],
            ["candidate median", fmt(100 * summary["candidate_cv"] if summary["candidate_cv"] is not None else None)],
            [
                f"speedup (median {summary['speedup_median']:.3f})",
                fmt(100 * summary["speedup_cv"] if summary["speedup_cv"] is not None else None),
            ],
            [
                "speedup within one placement (median over them)",
                fmt(100 * summary["within_cv_median"] if summary["within_cv_median"] is not None else None),
            ],
        ],
    )
    write_json(args.out, {"args": {k: str(v) for k, v in vars(args).items()}, "summary": summary, "placements": rows})


if __name__ == "__main__":
    main()
