"""The reward at RL scale: a GRPO-shaped batch through the reward function, against the executor alone.

    python scripts/bench_reward.py --device cuda --problems problems.jsonl --tasks 16 --k 8 --out runs/bench_reward.json
    python scripts/bench_reward.py --device cpu --tasks 2 --k 4            # the bundled cpu candidates
    python scripts/bench_reward.py --device cuda --recipe recipes/one-gpu-try/recipe.yaml --skip exec --tasks 2 --k 8
    python scripts/bench_reward.py --device cuda --tasks 8 --k 8 --skip exec --slots-per-gpu 4   # the reward alone

N tasks x K responses each: per task the honest candidate and broken variants of it, in proportions like early
RL (``--mix``): ``compile_error`` (a ``#error`` in its C++/CUDA source), ``wrong`` (its outputs overwritten
with a constant after its kernels ran), ``hack`` (it patches ``torch.allclose``), ``hang`` (its forward never
returns), ``unparsable`` (prose, no program). Each response is wrapped in Markdown as a coder writes it.

(exec)    the programs alone through the local executor, all at once;
(reward)  the responses through ``rubric_rl.reward.verl.compute_score`` the way verl's reward loop calls it:
          ``--workers`` workers each awaiting its share of the batch at once (in this process; ``--ray``: as Ray
          actors sharing the node's evaluation service, as in training), offline judge.
``--recipe``: the reward phase takes the recipe's own ``reward_kwargs`` (``reward.custom_reward_function``
of its YAML, read without verl: only ``ledger.dir`` is set to the phase's run folder, and the backend is left to
the reward's default, CUDA where a GPU is visible), so a recipe's reward path runs where verl cannot.
Each phase starts on a fresh build cache (``--warm`` runs both again on their now warm caches). The tables
give rewards per hour, the reward's wall time over the executor's, per variant the statuses, mean score and the
longest time from submission to result, and per variant the mean seconds from submission to result against the
Verdict's own stages (the reward phase's from its ledger): its total, builds, waits for the device or the task's
baseline, and the rest, spent in a worker holding an execution slot.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_reward_summary import print_report, summarize_phase
from benchlib import (
    DEFAULT_CANDIDATES,
    REPO,
    CutGuard,
    default_problems,
    discover,
    spread,
    write_json,
)

CPU_CANDIDATES = [  # (reference, honest candidate) of the cpu backend
    ("examples/fused_add_relu/reference.py", "examples/fused_add_relu/candidate_correct.py"),
    ("tests/adversarial/tasks/linear_relu.py", "tests/adversarial/honest/linear_relu_container.py"),
    ("tests/adversarial/tasks/conv_relu.py", "tests/adversarial/honest/conv_relu_container.py"),
]
DEFAULT_MIX = "honest=3,compile_error=2,wrong=1,hack=1,hang=1"
VARIANTS = ("honest", "compile_error", "wrong", "hack", "hang", "unparsable")


# The broken forwards replace ModelNew.forward in place: a subclass of a renamed ModelNew would recurse forever in
# the many candidates that call ``super(ModelNew, self).__init__()`` (the name then means the subclass), so every
# such "wrong" or "hang" response died at load as a runtime error instead of being wrong or hanging.
_WRONG_FORWARD = """


_honest_forward = ModelNew.forward


def _wrong_forward(self, *args):
    return _honest_forward(self, *args).clone().fill_(0.123)


ModelNew.forward = _wrong_forward
"""
_HANGING_FORWARD = """


def _hanging_forward(self, *args):
    while True:
        pass


ModelNew.forward = _hanging_forward
"""


def variant(program: str, kind: str) -> str | None:
    """The honest program broken the way ``kind`` says (None: no program at all)."""
    if kind == "honest":
        return program
    if kind == "compile_error":
        return re.sub(r"(#include <torch/extension\.h>)", r"\1\n#error deliberately broken", program, count=1)
    if kind == "wrong":
        return program.rstrip() + _WRONG_FORWARD
    if kind == "hack":
        return "import torch\ntorch.allclose = lambda *a, **k: True\n" + program
    if kind == "hang":
        return program.rstrip() + _HANGING_FORWARD
    if kind == "unparsable":
        return None
    raise ValueError(kind)


def respond(program: str | None) -> str:
    if program is None:
        return "I would fuse these operators into one kernel, but the details are left as an exercise."
    return f"<think>plan the kernel</think>\nHere is the optimised program.\n\n```python\n{program.rstrip()}\n```\n"


def parse_mix(text: str, k: int) -> list[str]:
    """K variant names, cycling through the mix's weighted order (honest first)."""
    order: list[str] = []
    for part in filter(None, text.split(",")):
        name, _, count = part.partition("=")
        if name not in VARIANTS:
            raise SystemExit(f"--mix: unknown variant {name!r} (have {', '.join(VARIANTS)})")
        order += [name] * int(count or 1)
    return [order[i % len(order)] for i in range(k)]


def load_batch(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The batch: one row per response, with its task, variant and response text."""
    from rubric_rl.tasks import Task, load_tasks

    if args.device == "cpu" and args.problems is None:
        pairs = [(Path(REPO / r).read_text(), Path(REPO / c)) for r, c in CPU_CANDIDATES][: args.tasks]
        tasks = [
            (Task(id=c.stem, problem_id=i, name=c.stem, origin="bench", code=ref), c)
            for i, (ref, c) in enumerate(pairs)
        ]
    else:
        all_tasks = {t.id: t for t in load_tasks(args.problems or default_problems())}
        tasks = [(all_tasks[tid], path) for tid, path in spread(discover(args.candidates, all_tasks), args.tasks)]
    kinds = parse_mix(args.mix, args.k)
    rows = []
    for task, path in tasks:
        honest = path.read_text()
        for i, kind in enumerate(kinds):
            program = variant(honest, kind)
            rows.append({"task": task, "variant": kind, "program": program, "response": respond(program), "i": i})
    return rows


def fresh_cache(label: str) -> str:
    path = Path(tempfile.mkdtemp(prefix=f"bench-reward-{label}-"))
    os.environ["RUBRIC_RL_CACHE"] = str(path)  # read by SandboxConfig's default cache_dir at construction
    return str(path)


_executors: dict[str, Any] = {}
PROGRESS = CutGuard()  # the running phase's finished samples, reported if the phase is cut (see cut_phase)


def reward_config(args: argparse.Namespace) -> Any:
    """The reward phase's RewardConfig (its ledger folder aside): the executor-alone phase takes its sandbox and
    executor settings from it, so that the two phases schedule alike."""
    from rubric_rl.reward.config import RewardConfig

    return RewardConfig.load(reward_kwargs(args, Path("unused")))


def worker_chunks(rows: list[dict], workers: int) -> list[list[dict]]:
    """Each reward-loop worker's share of the batch: every ``workers``-th sample."""
    return [rows[i::workers] for i in range(workers)]


def submission_order(rows: list[dict], workers: int) -> list[dict]:
    """The samples in the order the reward phase's workers reach the executor (each worker's share in turn), which
    the executor-alone phase follows. Submitted task by task instead, a task's later variants queued for the
    build workers before the next task's honest program: on an H100 the executor alone took 188 s for an 8 x 8 batch
    the reward function had taken 158 s for, its compile errors first and its honest programs' results 38 s later on
    average (docs/measurements.md, "The hang floor and the 16 x 8 batch")."""
    return [r for chunk in worker_chunks(rows, workers) for r in chunk]


async def executor_alone(rows: list[dict], device: str, config: Any) -> tuple[list[dict], float]:
    """The programs through the executor the reward's in-process path uses, configured as the reward's
    (``config``, a RewardConfig; kept for the warm pass, as the reward keeps its own), all at once, in ``rows``'
    order (see ``submission_order``)."""
    from rubric_rl.sandbox.executors.service import ThreadedExecutor

    if device not in _executors:
        _executors[device] = ThreadedExecutor(config.sandbox_config(device), config.executor_config())
    executor = _executors[device]
    started = time.monotonic()

    async def one(row: dict) -> dict:
        t = time.monotonic()
        v = await executor.evaluate(row["task"], row["program"])
        seconds = time.monotonic() - t
        return PROGRESS.add(
            {
                "variant": row["variant"],
                "status": v.status,
                "seconds": seconds,
                "stages": v.durations.model_dump(),
                "silence": v.diagnostics.longest_silence_s,
            }
        )

    results = await asyncio.gather(*(one(r) for r in rows if r["program"] is not None))
    return list(results), time.monotonic() - started


def recipe_reward_kwargs(recipe: Path, run_dir: Path) -> dict[str, Any]:
    """The recipe file's ``reward_kwargs``, its ledger in ``run_dir`` (its interpolations need verl's config)."""
    import yaml

    raw = yaml.safe_load(recipe.read_text()) or {}
    try:
        block = raw["reward"]["custom_reward_function"]
        kwargs = dict(block["reward_kwargs"])
    except (KeyError, TypeError) as e:
        raise SystemExit(f"{recipe}: no reward.custom_reward_function.reward_kwargs ({e})") from None
    if block.get("path") != "pkg://rubric_rl.reward.verl" or block.get("name") != "compute_score":
        raise SystemExit(f"{recipe}: its reward function is {block.get('path')}:{block.get('name')}, not rubric_rl's")
    return {**kwargs, "ledger": {**(kwargs.get("ledger") or {}), "dir": str(run_dir)}}


def phase_order(text: str) -> list[str]:
    """The phases in the order ``--order`` names them: exec and reward, each once."""
    order = [p.strip() for p in text.split(",")]
    if sorted(order) != ["exec", "reward"]:
        raise SystemExit(f"--order: name exec and reward once each, not {text!r}")
    return order


def executor_fields(args: argparse.Namespace) -> dict[str, Any]:
    """ExecutorConfig fields both phases set (none: the executor's defaults)."""
    fields = {"slots_per_gpu": args.slots_per_gpu, "capture_workers": getattr(args, "capture_workers", None)}
    return {name: value for name, value in fields.items() if value is not None}


def sandbox_fields(args: argparse.Namespace) -> dict[str, Any]:
    """SandboxConfig fields both phases set (none: the reward's defaults)."""
    return {} if args.stage_floor is None else {"limits": {"stage_timeout_floor_s": args.stage_floor}}


def reward_kwargs(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    if args.recipe is not None:
        kwargs = recipe_reward_kwargs(args.recipe, run_dir)
    else:
        kwargs = {
            "backend": args.device,
            "judge": {"offline": True, "cache": False},
            "service": {"mode": "ray" if args.ray else "inprocess"},
            "ledger": {"dir": str(run_dir)},
        }
    from rubric_rl.reward.config import deep_merge

    overrides = {k: v for k, v in (("executor", executor_fields(args)), ("sandbox", sandbox_fields(args))) if v}
    return deep_merge(kwargs, overrides)


async def score_chunk(chunk: list[dict], kwargs: dict[str, Any]) -> list[dict]:
    """One reward-loop worker's share: every sample awaited at once, as RewardLoopWorker.compute_score_batch."""
    from rubric_rl.reward.verl import compute_score

    async def one(row: dict) -> dict:
        t = time.monotonic()
        info = {"task_id": row["task"].id, "skill": "generate", "index": row["i"]}
        out = await compute_score(
            "bench", row["response"], row["task"].code, info, group_id=row["task"].id, group_size=row["k"], **kwargs
        )
        result = {"variant": row["variant"], "sample": (row["task"].id, row["i"]), "seconds": time.monotonic() - t}
        return PROGRESS.add({**result, **out})

    return list(await asyncio.gather(*(one(r) for r in chunk)))


class _RayRewardWorker:
    async def score(self, chunk: list[dict], kwargs: dict[str, Any]) -> list[dict]:
        return await score_chunk(chunk, kwargs)


async def reward_function(rows: list[dict], args: argparse.Namespace, run_dir: Path) -> tuple[list[dict], float]:
    kwargs = reward_kwargs(args, run_dir)
    for r in rows:
        r["k"] = args.k
    chunks = worker_chunks(rows, args.workers)
    started = time.monotonic()
    if args.ray:
        import ray

        env = {"env_vars": {"RUBRIC_RL_CACHE": os.environ["RUBRIC_RL_CACHE"]}}  # the service inherits it
        workers = [ray.remote(_RayRewardWorker).options(num_cpus=0, runtime_env=env).remote() for _ in chunks]
        parts = await asyncio.gather(*(w.score.remote(c, kwargs) for w, c in zip(workers, chunks, strict=True)))
    else:
        parts = await asyncio.gather(*(score_chunk(c, kwargs) for c in chunks))
    wall = time.monotonic() - started
    return with_ledger_stages([x for p in parts for x in p], run_dir), wall


def with_ledger_stages(results: list[dict], run_dir: Path) -> list[dict]:
    """Each result with its Verdict's stage seconds, from the reward ledger (compute_score returns only the
    reward's own stages): a ledger record names its sample by task and index within the group."""
    from rubric_rl.reward.ledger import ledger_dir, read_ledger

    if not ledger_dir(run_dir).exists():  # no sample reached the ledger: keep the phase's own numbers
        return results
    verdicts = {(rec.task_id, rec.index): rec.verdict for rec in read_ledger(ledger_dir(run_dir))}
    for r in results:
        found = verdicts.get(r["sample"])
        if found is not None:
            r["stages"] = found.durations.model_dump()
            r["silence"] = found.diagnostics.longest_silence_s
    return results


def cut_phase(
    report: dict[str, Any], args: argparse.Namespace, where: tuple[str, str, Path], done: list[dict], elapsed: float
) -> None:
    """Report a phase stopped before its end (SIGTERM): the samples it finished, its executor's stats then, and how
    many it had; its rewards per hour count finished samples only."""
    phase, label, run_dir = where
    results = done if phase == "exec" else with_ledger_stages(done, run_dir)
    try:
        stats = phase_executor_stats(phase, args, run_dir)
    except Exception as e:  # the report goes out without them
        stats = {"error": f"{type(e).__name__}: {e}"}
    summary = summarize_phase(f"{phase} ({label}, cut at {elapsed:.0f} s)", results, elapsed, stats)
    summary["cut"] = True
    report["phases"].append(summary)
    write_json(args.out, report)
    print_report(report, args)
    print(f"cut: {len(done)} samples finished in {elapsed:.0f} s; wrote {args.out}", flush=True)


def phase_executor_stats(phase: str, args: argparse.Namespace, run_dir: Path) -> dict | None:
    """The phase's executor's stats: the bench's own for the executor alone, the reward scorer's for the reward
    phase in this process (none from Ray workers, whose scorers live in their own processes)."""
    if phase == "exec":
        return _executors[args.device].stats()
    if args.ray:
        return None
    from rubric_rl.reward.config import RewardConfig
    from rubric_rl.reward.runtime import get_scorer

    stats: dict = get_scorer(RewardConfig.load(reward_kwargs(args, run_dir))).executor.stats()
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--problems", type=Path, default=None, help="KernelBench problems.jsonl (cuda; cpu: bundled)")
    ap.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES, help="honest candidates (cuda)")
    ap.add_argument("--tasks", type=int, default=16, help="N: tasks (GRPO groups)")
    ap.add_argument("--k", type=int, default=8, help="K: responses per task (rollout.n)")
    ap.add_argument("--mix", default=DEFAULT_MIX, help=f"variant=count,... cycled over K (default {DEFAULT_MIX})")
    ap.add_argument("--workers", type=int, default=8, help="reward-loop workers (reward.num_workers)")
    ap.add_argument("--ray", action="store_true", help="workers as Ray actors sharing the evaluation service")
    ap.add_argument("--recipe", type=Path, default=None, help="the reward kwargs of this recipe YAML (see above)")
    ap.add_argument("--slots-per-gpu", type=int, default=None, help="execution slots per GPU, both phases")
    ap.add_argument(
        "--capture-workers", type=int, default=None, help="capture workers, both phases (0: on the build workers)"
    )
    ap.add_argument(
        "--stage-floor", type=float, default=None, help="limits.stage_timeout_floor_s, both phases (default: reward's)"
    )
    ap.add_argument("--warm", action="store_true", help="run both phases again on their warm caches")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: exec,reward")
    ap.add_argument(
        "--order", default="exec,reward", help="the phases' order (the second meets a host the first warmed up)"
    )
    ap.add_argument("--out", type=Path, default=Path("runs/bench_reward.json"))
    args = ap.parse_args()
    if args.ray:
        import ray

        ray.init(
            namespace="rubric_rl",
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}},
        )
    rows = load_batch(args)
    PROGRESS.install()
    skip = set(filter(None, args.skip.split(",")))
    config = reward_config(args)
    report: dict[str, Any] = {
        "device": args.device,
        "tasks": len({r["task"].id for r in rows}),
        "k": args.k,
        "mix": parse_mix(args.mix, args.k),
        "workers": args.workers,
        "ray": args.ray,
        "recipe": str(args.recipe) if args.recipe else None,
        "executor": config.executor_config().model_dump(include={"slots_per_gpu", "capture_workers"}),
        "stage_floor_s": config.sandbox_config(args.device).limits.stage_timeout_floor_s,
        "cores": os.cpu_count(),
        "phases": [],
    }
    caches: dict[str, str] = {}
    for label in ("cold", "warm") if args.warm else ("cold",):
        for phase in phase_order(args.order):
            if phase in skip:
                continue
            if label == "cold":
                caches[phase] = fresh_cache(phase)
            os.environ["RUBRIC_RL_CACHE"] = caches[phase]
            print(f"{phase} ({label}): {len(rows)} responses, cache {caches[phase]}", flush=True)
            run_dir = Path(caches[phase]) / "run"
            PROGRESS.start(functools.partial(cut_phase, report, args, (phase, label, run_dir)))
            if phase == "exec":
                ordered = submission_order(rows, args.workers)
                results, wall = asyncio.run(executor_alone(ordered, args.device, config))
            else:
                results, wall = asyncio.run(reward_function(rows, args, run_dir))
            PROGRESS.stop()
            stats = phase_executor_stats(phase, args, run_dir)
            report["phases"].append(summarize_phase(f"{phase} ({label})", results, wall, stats))
            write_json(args.out, report)
    by_name = {p["phase"]: p for p in report["phases"]}
    for label in ("cold", "warm"):
        e, r = by_name.get(f"exec ({label})"), by_name.get(f"reward ({label})")
        if e and r:
            report[f"reward_over_exec_{label}"] = r["wall_s"] / e["wall_s"]
    write_json(args.out, report)
    print_report(report, args)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
