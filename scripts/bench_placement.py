"""Whether a model's timing level follows where its parameters landed: one process, the parameters of both
models moved to fresh allocations between blocks of timed rounds.

    python scripts/bench_placement.py --task L3-34 --candidate benchmarks/kernelbench/L3-34_vanilla_rnn_hidden.py
        [--problems problems.jsonl | --reference FILE] [--device cuda|cpu] [--placements 6] [--rounds 100]
        [--alternate] [--pin 14,15] [--out runs/bench_placement.json]

KernelBench L3-34's candidate measured 0.897-0.940 ms from one worker process to the next on an H100 and held
within 0.1% inside each, and eager moved on its own: a 2.5% speedup CV that more rounds cannot lower. If each
placement of the parameters here, inside one process, settles at its own level, the level follows where the memory
landed (on an H100, an L2 partition near or far from the SMs) and the timing protocol can average it inside one
evaluation; if the placements agree, the level is the process's own (its address layout: compare
``bench_sandbox.py --set worker_aslr=false``).

On an H100 (8 placements of L3-34, one after another) the first five gave speedups 14.1-14.8 and the last three
16.6-17.1, eager and the candidate both slower (16.5 -> 25 ms, 1.15 -> 1.5 ms): a level that changed inside one
process, by placement or by time. ``--alternate`` tells the two apart: its blocks go back and forth between two
placements (A B A B ...), so a level that follows the placement repeats with it and one that follows time does
not. Each block also records the GPU's clocks, temperature and power (``nvidia-smi``), and ``--pin`` runs this
process on the given CPUs, as the sandbox runs a timing worker on its device's reserved cores (a launch-bound eager
program's time is the host's).

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


def _tensors(model) -> list:
    """Every parameter and buffer of ``model``, in a fixed order."""
    found = []
    for module in model.modules():
        found += [(module, "param", name, t) for name, t in module.named_parameters(recurse=False)]
        found += [(module, "buffer", name, t) for name, t in module.named_buffers(recurse=False) if t is not None]
    return found


def _placement_of(model) -> list:
    """The storage each parameter and buffer of ``model`` uses now (to go back to with ``_use_placement``)."""
    return [t.data for _, _, _, t in _tensors(model)]


def _use_placement(model, placement: list) -> None:
    """Point every parameter and buffer of ``model`` at ``placement``'s storage (no copy)."""
    for (module, kind, name, t), data in zip(_tensors(model), placement, strict=True):
        if kind == "param":
            t.data = data
        else:
            module._buffers[name] = data


def _device_state() -> dict:
    """The first GPU's SM and memory clocks (MHz), temperature (C) and power (W), from nvidia-smi; empty without."""
    import subprocess

    fields = ["clocks.sm", "clocks.mem", "temperature.gpu", "power.draw"]
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.splitlines()[0]
        return {k: float(v) for k, v in zip(fields, out.split(","), strict=True)}
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return {}


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
    ap.add_argument("--alternate", action="store_true", help="blocks alternate between two placements: A B A B")
    ap.add_argument("--pin", default=None, help="CPUs to run on, e.g. 14,15 (the sandbox's timing cores)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_placement.json"))
    args = ap.parse_args()
    if args.placements < 2:
        raise SystemExit("--placements: at least 2, to compare them")
    if args.pin:
        import os

        try:
            os.sched_setaffinity(0, {int(c) for c in args.pin.split(",")})
        except (ValueError, OSError) as e:
            raise SystemExit(f"--pin {args.pin!r}: {e}") from None

    import torch

    from rubric_rl.sandbox.backends import make_backend
    from rubric_rl.sandbox.measure.inputs import clone_inputs, make_inputs
    from rubric_rl.sandbox.measure.timing import run_rounds
    from rubric_rl.sandbox.run.worker.base import load_module
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
    first: dict = {}  # --alternate: each model's first and second placement
    with torch.no_grad():
        for p in range(args.placements):
            placement = p % 2 if args.alternate else p
            for name, model in models.items():
                if args.alternate and p >= 2:
                    _use_placement(model, first[name][placement])
                elif p:
                    _fresh_parameters(model, pad, (p * 7919 % 64 + 1) << 20)
                if args.alternate and p < 2:
                    first.setdefault(name, []).append(_placement_of(model))
            state_before = _device_state()
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
                    "block": p,
                    "placement": placement,
                    "device_before": state_before,
                    "device_after": _device_state(),
                    "eager_median_ms": eager,
                    "candidate_median_ms": cand,
                    "speedup": eager / cand,
                    "within_cv": within_evaluation_cv(times["eager"], times["candidate"]),
                }
            )
            clocks = rows[-1]["device_after"]
            print(
                f"block {p} (placement {placement}): eager {eager:.4f} ms, candidate {cand:.4f} ms, "
                f"speedup {eager / cand:.4f}"
                + (f"; SM {clocks['clocks.sm']:.0f} MHz, {clocks['temperature.gpu']:.0f} C" if clocks else "")
            )

    within = [r["within_cv"] for r in rows if r["within_cv"] is not None]
    summary = {
        "eager_cv": cv([r["eager_median_ms"] for r in rows]),
        "candidate_cv": cv([r["candidate_median_ms"] for r in rows]),
        "speedup_cv": cv([r["speedup"] for r in rows]),
        "speedup_median": statistics.median(r["speedup"] for r in rows),
        "within_cv_median": statistics.median(within) if within else None,
    }
    by_placement = {}
    if args.alternate:
        for placement, label in ((0, "A"), (1, "B")):
            ups = [r["speedup"] for r in rows if r["placement"] == placement]
            by_placement[label] = {"speedups": ups, "median": statistics.median(ups), "cv": cv(ups)}
        summary["by_placement"] = by_placement
    blocks = "blocks alternating between 2 placements" if args.alternate else "placements of the parameters"
    print_table(
        f"{args.placements} {blocks} in one process ({args.device}, {args.rounds} rounds each)",
        ["quantity", "CV % across blocks"],
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
            *[
                [
                    f"speedup, placement {label}'s blocks (median {v['median']:.3f})",
                    fmt(100 * v["cv"] if v["cv"] is not None else None),
                ]
                for label, v in by_placement.items()
            ],
        ],
    )
    write_json(args.out, {"args": {k: str(v) for k, v in vars(args).items()}, "summary": summary, "placements": rows})


if __name__ == "__main__":
    main()
