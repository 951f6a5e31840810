"""Benchmark of the judge client's own overhead: judgments per second through ``LLMJudge`` against a local,
scripted OpenAI-compatible server that answers instantly (so model speed is not measured), with 64 requests in
flight and 10% injected errors (a 429/500 mix), cold cache against warm cache.

    .venv/bin/python scripts/bench_judge.py [--n 1000] [--concurrency 64] [--error-rate 0.1] [--out FILE]

Prints a table and writes the results, with the resolved judge config, as JSON. Only 127.0.0.1 is contacted.
The server is the judge tests' own (tests/stub_server.py), imported from the checkout by path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import openai
from rich.console import Console
from rich.table import Table

from rubric_rl.judge import JudgeConfig, JudgeRequest, LLMJudge, build_request
from rubric_rl.resources import content_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from stub_server import Reply, StubOpenAIServer, answer_from_schema


class FaultyResponder:
    """Valid answers, except a seeded ``error_rate`` share of 429s and 500s (half each)."""

    def __init__(self, error_rate: float, seed: int) -> None:
        self.error_rate = error_rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            draw, kind = self._rng.random(), self._rng.random()
        if draw < self.error_rate:
            return Reply(status=429 if kind < 0.5 else 500)
        return Reply(content=answer_from_schema(request, 4), prompt_tokens=1800, completion_tokens=220)


def _serve(conn: Connection, error_rate: float, seed: int) -> None:
    """Child process: the stub server, so that its work does not share the client's interpreter (GIL)."""
    with StubOpenAIServer(FaultyResponder(error_rate, seed)) as server:
        conn.send(server.url)
        conn.recv()  # stop
        conn.send(
            {
                "http_requests": server.request_count,
                "http_errors": sum(s != 200 for s in server.statuses),
                "max_in_flight": server.max_in_flight,
            }
        )


class ServerProcess:
    """The stub server in a child process for one scenario."""

    def __init__(self, error_rate: float, seed: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, error_rate, seed), daemon=True)

    def __enter__(self) -> str:
        self._process.start()
        return str(self._conn.recv())

    def stats(self) -> dict[str, Any]:
        self._conn.send("stop")
        stats: dict[str, Any] = self._conn.recv()
        return stats

    def __exit__(self, *exc: object) -> None:
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()


def _requests(n: int) -> list[JudgeRequest]:
    example = content_dir("examples") / "fused_add_relu"
    reference = (example / "reference.py").read_text()
    candidate = (example / "candidate_correct.py").read_text()
    return [build_request("generate", reference, f"{candidate}\n# variant {i}\n", backend="cpu") for i in range(n)]


async def _scenario(config: JudgeConfig, requests: list[JudgeRequest]) -> tuple[dict[str, Any], float]:
    judge = LLMJudge(config)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        judgments = await asyncio.gather(*(judge.judge(r) for r in requests))
    finally:
        await judge.aclose()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    latencies = sorted(j.latency_s for j in judgments)
    result = {
        "judgments": len(judgments),
        "wall_s": round(wall, 3),
        "judgments_per_s": round(len(judgments) / wall, 1),
        "client_cpu_ms_per_judgment": round(1000 * cpu / len(judgments), 3),
        "latency_p50_ms": round(1000 * statistics.median(latencies), 2),
        "latency_p95_ms": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 2),
        "retries": judge.stats.retries,
        "judge_failed": sum(j.judge_failed for j in judgments),
        "cache_hits": sum(j.cache_hit for j in judgments),
        "lost": len(requests) - len(judgments) + sum(len(j.samples) != config.samples for j in judgments),
    }
    return result, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="Judgments per scenario.")
    parser.add_argument("--concurrency", type=int, default=64, help="Requests in flight (the judge's semaphore).")
    parser.add_argument("--error-rate", type=float, default=0.1, help="Share of requests answered 429 or 500.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the injected errors.")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_judge.json"), help="JSON results file.")
    args = parser.parse_args()

    requests = _requests(args.n)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cache_path = Path(tmp) / "judgments.sqlite3"
        scenarios = [
            ("no errors, no cache", 0.0, False),
            (f"{args.error_rate:.0%} errors, cold cache", args.error_rate, True),
            (f"{args.error_rate:.0%} errors, warm cache", args.error_rate, True),
        ]
        for name, rate, cache in scenarios:
            server = ServerProcess(rate, args.seed)
            with server as url:
                config = JudgeConfig(
                    base_url=url,
                    model="stub-judge",
                    concurrency=args.concurrency,
                    timeout_s=10.0,
                    max_retries=6,
                    backoff_initial_s=0.005,
                    backoff_max_s=0.05,
                    cache=cache,
                    cache_path=cache_path,
                )
                result, _ = asyncio.run(_scenario(config, requests))
                result.update(server.stats())
            results.append({"scenario": name, "error_rate": rate, "cache": cache, **result})

    table = Table(title=f"judge client: {args.n} judgments, {args.concurrency} in flight, local stub server")
    columns = [
        "scenario",
        "judgments_per_s",
        "client_cpu_ms_per_judgment",
        "wall_s",
        "latency_p50_ms",
        "latency_p95_ms",
        "http_requests",
        "http_errors",
        "retries",
        "judge_failed",
        "cache_hits",
        "max_in_flight",
        "lost",
    ]
    for c in columns:
        table.add_column(c.replace("_", " "), justify="left" if c == "scenario" else "right")
    for r in results:
        table.add_row(*(str(r[c]) for c in columns))
    Console().print(table)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "judge client overhead (scripts/bench_judge.py)",
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "config": config.model_dump(mode="json", exclude={"base_url", "cache_path", "cache"}),
        "environment": {
            "python": sys.version.split()[0],
            "openai": openai.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2))
    Console().print(f"wrote {args.out}")
    return 0 if all(r["lost"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
