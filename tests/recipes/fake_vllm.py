"""A stand-in for the ``vllm`` executable in tests: ``fake_vllm.py serve MODEL --host H --port P ...`` serves
``/health``, ``/v1/models`` and chat completions on the loopback interface, like ``vllm serve`` once loaded.

``--startup-delay S`` (an extra flag, passed through ``ServeConfig.extra_args``) waits before listening, like a
model load; ``--exit-code N`` exits at once instead. It starts one child process, as vLLM starts workers for
tensor parallelism, so that a test can check that stopping the server stops its whole process group; the child's
pid is written to ``--pid-file`` when given."""

import argparse
import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def completion(content: str, model: str) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--tensor-parallel-size", type=int, required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--gpu-memory-utilization", type=float, required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--enable-prefix-caching", action="store_true")
    parser.add_argument("--generation-config")
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int)
    parser.add_argument("--pid-file")
    args = parser.parse_args()
    if args.host not in ("127.0.0.1", "localhost"):
        sys.exit("fake_vllm binds to loopback only")
    if args.exit_code is not None:
        sys.exit(args.exit_code)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if args.pid_file:
        Path(args.pid_file).write_text(str(worker.pid))
    time.sleep(args.startup_delay)
    name = args.served_model_name

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                self._send(404, {"error": self.path})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(200, completion("ok", name))

    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
