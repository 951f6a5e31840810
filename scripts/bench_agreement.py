"""Where KernelBench's speedups and the sandbox's part: each candidate timed under KernelBench's protocol, under the
sandbox's, and under the steps between, in the same processes on one GPU.

    python scripts/bench_agreement.py --problems problems.jsonl [--n 5 | --only L1-12,...] [--processes 3]
        [--repeats 2] [--protocols kernelbench,sandbox] [--builds default,evaluator_flags]
        [--compare runs/bench_throughput.json] [--out runs/bench_agreement.json]
    python scripts/bench_agreement.py --from runs/bench_agreement.json --compare runs/bench_throughput.json

Protocols, from (a)'s to the sandbox's, one change at a time:
  kernelbench       (a) itself (scripts/kernelbench_style_eval.py's ``time_cuda``): one input set, warm L2, CUDA
                    events around each call, the candidate's calls then the reference's;
  events            fresh inputs every round (the sandbox's ``make_inputs``), each model on its own copy, the
                    models in rotating order; still CUDA events and a warm L2;
  events_flush      and the L2 flushed before each call (the sandbox's cuda backend);
  host_sync_warm    the sandbox's rounds (``timing.run_rounds``) with the flush left out: the host clock read
                    between device-wide synchronisations;
  sandbox           ``timing.run_rounds`` as Verdicts are timed: host clock, device-wide syncs, L2 flush;
  evaluator         the sandbox itself (``Evaluator.evaluate``: its build, a fresh worker, the Verdict's speedup),
                    ``--evaluations`` times; evaluator_pinned: the same with the worker moved onto ``--cores`` for
                    its rounds, as the executor moves it onto its reserved timing cores (alternating with the
                    unpinned ones).

Builds (``--builds``), each timed under every protocol (``--protocols``, default all):
  default           torch's default ``load_inline`` with the candidate's own flags, as (a) builds it: host code
                    (the torch glue that checks arguments, allocates and launches) at gcc's default -O0 when the
                    candidate asks for no level;
  evaluator_flags   the same build with the flags the sandbox adds to every build
                    (``rubric_rl.sandbox.build.extension.EVALUATOR_FLAGS``: -O3 for host and device code), without its
                    source split or precompiled header; columns ``PROTOCOL/evaluator_flags``.

Each candidate is built once per build by torch's ``load_inline`` (as in (a)); then ``--processes`` fresh processes,
one at a time (``--cores``: on those CPUs, as the executor's workers time on its reserved cores), each run every
protocol ``--repeats`` times in turn. A protocol's spread over those runs is its own
noise; a step between two protocols that is larger than both noises is that step's effect on the speedup.
``--compare`` puts (a)'s speedup and the executor's (a bench_throughput.py report with its agreement table) beside
them: when ``kernelbench`` reproduces (a) and ``sandbox`` reproduces the executor, the gap between (a) and the
executor is the protocol's, and the table says which step makes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, cv, default_problems, discover, fmt, print_table, select, spread, write_json

PROTOCOLS = ["kernelbench", "events", "events_flush", "host_sync_warm", "sandbox"]
BUILDS = ["default", "evaluator_flags"]
# The sandbox itself: Evaluator.evaluate (its own build, worker and Verdict), the worker timing where the scheduler
# puts it, and moved onto --cores for its rounds as the executor moves it onto its reserved timing cores.
EVALUATOR = ["evaluator", "evaluator_pinned"]


def column(protocol: str, build: str) -> str:
    """A table column: the protocol, and the build when it is not the default one."""
    return protocol if build == "default" else f"{protocol}/{build}"


def build_flags(build: str) -> tuple[list[str], list[str]]:
    """The (host, nvcc) flags a build adds to the candidate's own ``load_inline`` flags."""
    if build == "default":
        return [], []
    if build == "evaluator_flags":
        from rubric_rl.sandbox.build.extension import EVALUATOR_FLAGS

        return list(EVALUATOR_FLAGS["cuda"]["cflags"]), list(EVALUATOR_FLAGS["cuda"]["cuda_cflags"])
    raise ValueError(f"unknown build {build!r}; expected one of {BUILDS}")


def _load_candidate(cand_path: str, build: str):
    """Execute the candidate, its ``load_inline`` given the build's flags after its own (timing processes must pass
    the same flags as the build, or torch would build again)."""
    import torch.utils.cpp_extension as cpp_extension
    from kernelbench_style_eval import load

    cflags, cuda_cflags = build_flags(build)
    original = cpp_extension.load_inline

    def load_inline(*args, **kwargs):
        kwargs["extra_cflags"] = [*(kwargs.get("extra_cflags") or []), *cflags]
        kwargs["extra_cuda_cflags"] = [*(kwargs.get("extra_cuda_cflags") or []), *cuda_cflags]
        return original(*args, **kwargs)

    cpp_extension.load_inline = load_inline  # the candidate's `from ... import load_inline` runs after this
    try:
        return load("candidate", Path(cand_path).read_text())
    finally:
        cpp_extension.load_inline = original


def _protocol_runs(
    ref_path: str, cand_path: str, repeats: int, perf_trials: int, warmup: int, protocols: list[str], build: str
) -> dict:
    """Inside one fresh process: every protocol ``repeats`` times; speedups and medians per run."""
    import torch
    from kernelbench_style_eval import load, time_cuda

    from rubric_rl.sandbox.backends.cuda import CudaBackend
    from rubric_rl.sandbox.measure.inputs import make_inputs
    from rubric_rl.sandbox.measure.timing import run_rounds

    torch.set_grad_enabled(False)  # as the sandbox's worker; (a) times inside torch.no_grad()
    ref = load("reference", Path(ref_path).read_text())
    torch.manual_seed(42)
    init = ref.get_init_inputs()
    ref_model = ref.Model(*init).cuda()
    cand = _load_candidate(cand_path, build)
    torch.manual_seed(42)
    new_model = cand.ModelNew(*init).cuda()
    backend = CudaBackend()
    backend.setup(memory_fraction=0.95, threads=None)
    models = {"candidate": new_model, "eager": ref_model}

    def fresh(r: int) -> list:
        return make_inputs(ref, seed=1000 + r, device=backend.device, distribution="task", backend_seed=backend.seed)

    def clone(xs: list) -> list:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]

    torch.manual_seed(42)
    one_set = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    out_ref, out_new = ref_model(*one_set), new_model(*one_set)
    correct = None  # (a)'s check, for single-tensor outputs; the sandbox's own is the executor's Verdict
    if isinstance(out_ref, torch.Tensor) and isinstance(out_new, torch.Tensor):
        correct = out_ref.shape == out_new.shape and bool(torch.allclose(out_ref, out_new, atol=1e-4, rtol=1e-4))
    del out_ref, out_new

    def events_rounds(flush: bool) -> dict[str, list[float]]:
        names = list(models)
        warm = fresh(-1)
        for name in names:
            for _ in range(warmup):
                models[name](*clone(warm))
        torch.cuda.synchronize()
        times: dict[str, list[float]] = {n: [] for n in names}
        for r in range(perf_trials):
            inputs = fresh(r)
            order = names[r % len(names) :] + names[: r % len(names)]
            outs = {}
            for name in order:
                x = inputs if name == order[-1] else clone(inputs)
                if flush:
                    backend.flush_cache()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                outs[name] = models[name](*x)
                end.record()
                torch.cuda.synchronize()
                times[name].append(start.elapsed_time(end))
            del outs, inputs
        return times

    def sandbox_rounds(flush: bool) -> dict[str, list[float]]:
        if not flush:
            backend.flush_cache = lambda: None  # type: ignore[method-assign]
        try:
            return run_rounds(
                models,
                make_inputs=fresh,
                clone=clone,
                backend=backend,
                n_rounds=perf_trials,
                n_warmup=warmup,
                checked_rounds=set(),
                on_checked_round=lambda r, outputs: None,
                after_round=lambda outputs: None,
            )
        finally:
            backend.__dict__.pop("flush_cache", None)

    run = {
        "kernelbench": lambda: {
            "candidate": time_cuda(new_model, one_set, perf_trials),
            "eager": time_cuda(ref_model, one_set, perf_trials),
        },
        "events": lambda: events_rounds(flush=False),
        "events_flush": lambda: events_rounds(flush=True),
        "host_sync_warm": lambda: sandbox_rounds(flush=False),
        "sandbox": lambda: sandbox_rounds(flush=True),
    }
    out: dict = {"correct": correct, "runs": {column(p, build): [] for p in protocols}}
    for _ in range(repeats):
        for p in protocols:
            times = run[p]()
            cand_ms, eager_ms = statistics.median(times["candidate"]), statistics.median(times["eager"])
            out["runs"][column(p, build)].append(
                {"candidate_ms": cand_ms, "eager_ms": eager_ms, "speedup": eager_ms / cand_ms}
            )
    return out


def _child(args: argparse.Namespace) -> None:
    if args.cores:  # before torch starts its threads: they inherit the mask
        os.sched_setaffinity(0, _cores(args.cores))
    if args.build_only:
        _load_candidate(args.child[1], args.build)  # builds through torch's load_inline
        print(json.dumps({"built": True}))
        return
    protocols = _names(args.protocols, PROTOCOLS, "--protocols")
    print(json.dumps(_protocol_runs(*args.child, args.repeats, args.perf_trials, args.warmup, protocols, args.build)))


def _names(spec: str, known: list[str], option: str) -> list[str]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise SystemExit(f"{option} {spec!r}: expected comma-separated names from {', '.join(known)}")
    return names


def _cores(spec: str) -> frozenset[int]:
    from rubric_rl.sandbox.run.cpu_cores import available_cores, parse_cpu_list

    try:
        cores = parse_cpu_list(spec)
    except ValueError:
        raise SystemExit(f"--cores {spec!r}: expected a CPU list, e.g. 14,15 or 14-15") from None
    if not cores or not cores <= available_cores():
        raise SystemExit(f"--cores {spec!r}: not CPUs this process may run on ({sorted(available_cores())})")
    return cores


def _spawn(argv: list[str], ext_dir: Path, timeout: float) -> dict:
    path = os.pathsep.join(filter(None, [str(REPO), str(REPO / "scripts"), os.environ.get("PYTHONPATH")]))
    env = {"TORCH_EXTENSIONS_DIR": str(ext_dir), "PYTHONPATH": path}
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *argv],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": (proc.stderr or proc.stdout)[-400:]}


def summarize_protocols(results: list[dict], names: list[str] = PROTOCOLS) -> dict:
    """Per protocol over every run of every process: median speedup, its CV, and the CV of the per-process medians
    (the spread a fresh process brings, which is what separates (a) from one repeat of itself). Runs without a
    speedup (an evaluation that was not correct) are left out."""
    out = {}
    for p in names:
        per_process = [[r for r in res["runs"].get(p, []) if r.get("speedup")] for res in results if "runs" in res]
        flat = [r for runs in per_process for r in runs]
        if not flat:
            continue
        out[p] = {
            "speedup": statistics.median(r["speedup"] for r in flat),
            "cv": cv([r["speedup"] for r in flat]),
            "process_cv": cv([statistics.median(r["speedup"] for r in runs) for runs in per_process if runs]),
            "speedups": [r["speedup"] for r in flat],
            "candidate_ms": statistics.median(r["candidate_ms"] for r in flat),
            "eager_ms": statistics.median(r["eager_ms"] for r in flat),
        }
    return out


def evaluator_runs(
    reference: str, program: str, n: int, cores: frozenset[int] | None, cache: Path, backend: str = "cuda"
) -> list[dict]:
    """``n`` evaluations by the sandbox itself, each one a fresh worker, alternating unpinned and (with ``cores``)
    pinned for the rounds; one result per evaluation, shaped as a process's runs."""
    from rubric_rl.sandbox import Evaluator, Placement, SandboxConfig

    ev = Evaluator(
        SandboxConfig(
            backend=backend, build={"cache_dir": cache}, timing={"compile_baseline": False, "profile_kernels": False}
        )
    )
    results = []
    for _ in range(n):
        for label in EVALUATOR if cores else EVALUATOR[:1]:
            pinned = Placement(timing_cores=cores if label == "evaluator_pinned" else None)
            v = ev.evaluate(reference, program, placement=pinned)
            run: dict = {"status": v.status, "speedup": v.speedup_eager}
            if v.timings is not None and v.timings.candidate is not None and v.timings.eager is not None:
                run.update(candidate_ms=v.timings.candidate.median_ms, eager_ms=v.timings.eager.median_ms)
            results.append({"runs": {label: [run]}})
    return results


def compare_rows(report: dict, throughput: dict) -> list[list[str]]:
    """(a) and the executor (from a bench_throughput report) beside the kernelbench and sandbox protocols."""
    agreement = {a["candidate"]: a for a in throughput.get("agreement", [])}
    a_results = {r["candidate"]: r for r in throughput.get("a_kernelbench_style", {}).get("results", [])}
    rows = []
    for name, entry in report["candidates"].items():
        protos = entry.get("protocols", {})
        kb, sb = protos.get("kernelbench"), protos.get("sandbox")
        a_speedup = a_results.get(name, {}).get("speedup")
        ex = agreement.get(name, {}).get("executor_speedups") or []
        ex_median = statistics.median(ex) if ex else None

        def ratio(x, y):
            return fmt(x / y, ".3f") if x and y else "-"

        rows.append(
            [
                name,
                fmt(a_speedup, ".3f"),
                fmt(kb and kb["speedup"], ".3f"),
                ratio(a_speedup, kb and kb["speedup"]),
                fmt(ex_median, ".3f"),
                fmt(sb and sb["speedup"], ".3f"),
                ratio(ex_median, sb and sb["speedup"]),
            ]
        )
    return rows


def print_report(report: dict, throughput: dict | None) -> None:
    columns = report.get("columns") or PROTOCOLS + EVALUATOR  # reports before --builds: the default build's
    rows = []
    for name, entry in report["candidates"].items():
        protos = entry.get("protocols", {})
        row = [name, {True: "yes", False: "no", None: "-"}[entry.get("correct")]]
        for p in columns:
            s = protos.get(p)
            row.append(f"{s['speedup']:.3f} ({100 * (s['cv'] or 0):.2f}%)" if s else "-")
        rows.append(row)
    print_table(
        f"speedup over eager by protocol, median (CV over {report['processes']} processes x {report['repeats']} runs)",
        ["candidate", "allclose", *columns],
        rows,
    )
    if throughput is not None:
        print_table(
            "(a) and the executor beside the protocols that should reproduce them",
            ["candidate", "(a)", "kernelbench", "(a)/kb", "executor", "sandbox", "executor/sb"],
            compare_rows(report, throughput),
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=Path, default=None)
    ap.add_argument("--candidates", type=Path, default=REPO / "benchmarks" / "kernelbench")
    ap.add_argument("--n", type=int, default=5, help="the first N of bench_throughput's spread (its (a) set)")
    ap.add_argument("--only", default="", help="comma-separated candidate names or task ids instead")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2, help="runs of every protocol in each process")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma-separated, from " + ", ".join(PROTOCOLS))
    ap.add_argument(
        "--builds", default="default", help="comma-separated, from " + ", ".join(BUILDS) + " (see the module's text)"
    )
    ap.add_argument("--build", default="default", help=argparse.SUPPRESS)  # a child's build
    ap.add_argument("--perf-trials", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    ap.add_argument(
        "--cores",
        default="",
        help="CPUs the timing processes run on, e.g. 14,15 (the executor's reserved timing cores on a 16-core host); "
        "default: wherever the scheduler puts them",
    )
    ap.add_argument(
        "--evaluations",
        type=int,
        default=3,
        help="evaluations of each candidate by the sandbox itself (Evaluator), each way (unpinned; with --cores, "
        "pinned to them for the rounds); 0: none",
    )
    ap.add_argument("--compare", type=Path, default=None, help="a bench_throughput.py report")
    ap.add_argument("--from", dest="from_", type=Path, default=None, help="print an earlier report, measure nothing")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_agreement.json"))
    ap.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    throughput = json.loads(args.compare.read_text()) if args.compare else None
    if args.from_:
        print_report(json.loads(args.from_.read_text()), throughput)
        return

    import torch

    if args.cores:
        _cores(args.cores)  # a bad spec fails here, before anything is built
    protocols = _names(args.protocols, PROTOCOLS, "--protocols")
    builds = _names(args.builds, BUILDS, "--builds")
    columns = [column(p, b) for b in builds for p in protocols] + (EVALUATOR if args.evaluations else [])
    if not torch.cuda.is_available():
        raise SystemExit("bench_agreement times CUDA programs: it needs a GPU")
    from concurrent.futures import ThreadPoolExecutor

    from rubric_rl.tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(args.problems or default_problems())}
    found = discover(args.candidates, tasks)
    chosen = select(found, args.n, args.only) if args.only else spread(found, args.n)
    report: dict = {
        "gpu": torch.cuda.get_device_name(0),
        "processes": args.processes,
        "repeats": args.repeats,
        "perf_trials": args.perf_trials,
        "cores": args.cores or None,
        "columns": columns,
        # What the timing processes inherit and the sandbox's workers do not (they start from a short list).
        "environment": {
            k: v for k, v in os.environ.items() if k.startswith(("CUDA", "TORCH", "PYTORCH", "OMP", "MKL", "TRITON"))
        },
        "candidates": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-agree-") as tmp:
        files = []
        task_of = {path.stem: tid for tid, path in chosen}
        for tid, path in chosen:
            d = Path(tmp, path.stem)
            d.mkdir()
            Path(d, "ref.py").write_text(tasks[tid].code)
            Path(d, "cand.py").write_text(path.read_text())
            files.append((path.stem, d))
        started = time.monotonic()
        jobs = [(name, d, build) for name, d in files for build in builds]
        with ThreadPoolExecutor(len(jobs)) as pool:  # builds side by side; nothing is timed meanwhile
            done = pool.map(
                lambda j: _spawn(
                    ["--build-only", "--build", j[2], "--child", str(j[1] / "ref.py"), str(j[1] / "cand.py")],
                    j[1] / f"ext-{j[2]}",
                    args.timeout,
                ),
                jobs,
            )
            built = {(name, build): b for (name, _, build), b in zip(jobs, done, strict=True)}
        n_built = sum("built" in b for b in built.values())
        print(f"built {n_built} of {len(jobs)} in {time.monotonic() - started:.0f} s")
        for name, d in files:
            entry: dict = {"build": {build: built[name, build] for build in builds}}
            report["candidates"][name] = entry
            failed = [build for build in builds if "built" not in built[name, build]]
            for build in failed:
                print(f"{name}: {build} build failed: {built[name, build].get('error')}", flush=True)
            if failed:
                continue
            results = []
            for i, build in ((i, b) for b in builds for i in range(args.processes)):  # one at a time: GPU to itself
                t0 = time.monotonic()
                res = _spawn(
                    [
                        "--child",
                        str(d / "ref.py"),
                        str(d / "cand.py"),
                        "--repeats",
                        str(args.repeats),
                        "--perf-trials",
                        str(args.perf_trials),
                        "--warmup",
                        str(args.warmup),
                        "--protocols",
                        ",".join(protocols),
                        "--build",
                        build,
                        *(["--cores", args.cores] if args.cores else []),
                    ],
                    d / f"ext-{build}",
                    args.timeout,
                )
                results.append(res)
                speeds = res
                if "runs" in res:
                    speeds = {p: [round(r["speedup"], 3) for r in runs] for p, runs in res["runs"].items()}
                print(f"{name} {build} process {i}: {time.monotonic() - t0:.0f} s {speeds}", flush=True)
            checks = [r.get("correct") for r in results if "runs" in r]
            entry["correct"] = None if not checks or None in checks else all(checks)
            entry["processes"] = results
            entry["protocols"] = summarize_protocols(results, [c for c in columns if c not in EVALUATOR])
            if args.evaluations:
                t0 = time.monotonic()
                evaluated = evaluator_runs(
                    tasks[task_of[name]].code,
                    (d / "cand.py").read_text(),
                    args.evaluations,
                    _cores(args.cores) if args.cores else None,
                    Path(tmp, "sandbox-build"),
                )
                entry["evaluations"] = evaluated
                entry["protocols"].update(summarize_protocols(evaluated, EVALUATOR))
                speeds = {k: [r["speedup"] for e in evaluated for r in e["runs"].get(k, [])] for k in EVALUATOR}
                print(f"{name} evaluations: {time.monotonic() - t0:.0f} s {speeds}", flush=True)
            write_json(args.out, report)
    write_json(args.out, report)
    print_report(report, throughput)


if __name__ == "__main__":
    main()
