"""Starting the execution worker in a fresh, limited process, and describing how it ended.

Each worker is a new interpreter (``subprocess``, not fork: no evaluator state is inherited) in its own
session and process group, killed by the kernel when the evaluator's process ends (``spawn``), in a private
temporary directory that is also its HOME and TMPDIR, with an
environment built from an allowlist (API keys and the like do not pass), core dumps off, file sizes capped,
and on the cpu backend an address-space cap. A monitor thread samples the resident memory of the whole
process group and kills it past the limit (CUDA's address-space reservations rule out RLIMIT_AS there).
How the process ended is reported in words; an exit status alone never means success.

A worker may run under a launcher (Nsight Compute's ``ncu``, see ``measure.ncu``): the launcher is then the
process started here, with the same limits and environment, and the worker its child, told so (``--launched``)
so that it asks to be killed when the launcher goes. Killing the process tree kills both.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.run.cpu_cores import available_cores
from rubric_rl.sandbox.run.proctree import kill_tree
from rubric_rl.sandbox.run.protocol import Channel, widen_pipe
from rubric_rl.sandbox.run.spawn import popen

_ENV_PASSTHROUGH = (
    "PATH",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "LANG",
    "LC_ALL",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CC",
    "CXX",
    "TORCH_CUDA_ARCH_LIST",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "PYTORCH_CUDA_ALLOC_CONF",
)
# Fixed glibc malloc thresholds for cpu-backend workers. By its adaptive defaults glibc hands large freed buffers
# back to the OS or not depending on the process's history, so whether a timed call's multi-MB temporaries
# page-faulted afresh changed from one evaluation to the next (eager's median on the bundled example 0.5-0.7 ms in
# some workers, 2.2-3.0 ms in others: a speedup CV of 42% over 25 evaluations on 2 cores; 5% with these).
CPU_MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"
MAX_MESSAGE_BYTES = 4096 << 20  # the largest message a worker may send (outputs of a trial)
_CPU_ADDRESS_SPACE_EXTRA_MB = 8192  # torch and its libraries map this much before any tensor exists
_SIGNAL_WORDS = {
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error",
    signal.SIGABRT: "aborted",
    signal.SIGFPE: "floating-point exception",
    signal.SIGILL: "illegal instruction",
    signal.SIGKILL: "killed",
}


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[3])


class WorkerProcess:
    """One execution worker; use as a context manager so the process and its directory always go away."""

    def __init__(
        self,
        config: SandboxConfig,
        *,
        cuda_visible_devices: str | None = None,
        ahead: bool = False,
        compiles: bool = False,
        launcher: Sequence[str] = (),
        launcher_exit_s: float = 60.0,
    ) -> None:
        """``ahead``: started before it is needed (a spare), so it also imports what its first phases would
        import lazily (torch._dynamo, 1.6 s on 2 cores) while it waits for its setup; ``compiles``: and
        torch.compile's inductor (0.9 s more: for a spare that will measure a baseline). ``launcher``: a command
        line the worker's own is appended to (``ncu ...``), which runs it as its child; ``launcher_exit_s``: how
        long a finished worker's launcher may take to end by itself (``settle``: ncu writes its report then)."""
        self.config = config
        self.cuda_visible_devices = cuda_visible_devices
        self.ahead = ahead
        self.compiles = compiles
        self.launcher = list(launcher)
        self.launcher_exit_s = launcher_exit_s
        self.workdir = Path(tempfile.mkdtemp(prefix="rubric-rl-worker-"))
        os.chmod(self.workdir, 0o700)
        self.proc: subprocess.Popen[bytes] | None = None
        self.channel: Channel | None = None
        self.memory_exceeded = False
        self.peak_rss_mb = 0.0
        self._stop_monitor = threading.Event()
        self._monitor: threading.Thread | None = None

    def _env(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in _ENV_PASSTHROUGH if k in os.environ}
        # The CPUs this process may run on (the executor moves itself off the timing cores), not the machine's.
        threads = str(self.config.cpu_threads or len(available_cores()) or 1)
        inductor = self.config.build.cache_dir.parent / "inductor"
        env.update(
            {
                "HOME": str(self.workdir),
                "TMPDIR": str(self.workdir),
                # Our package first; the evaluator's own path after it (where its dependencies may live).
                "PYTHONPATH": os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH", "")) if p),
                "PYTHONHASHSEED": "0",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads,
                "TORCH_EXTENSIONS_DIR": str(self.workdir / "torch_extensions"),
                # torch.compile's caches are shared between workers so that baselines warm up once per machine;
                # only the evaluator's own (unarmed) compile phase writes them.
                "TORCHINDUCTOR_CACHE_DIR": str(inductor),
                "TRITON_CACHE_DIR": str(inductor / "triton"),
                # Inductor's compile pool otherwise starts a timer thread whenever a compile result arrives after
                # its last one expired: one came in during an H100 run's timing rounds and the integrity check
                # called the honest candidate a hack ("thread left running: subproc_worker_timer").
                "TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL": "0",
                "CUDA_CACHE_PATH": str(self.workdir / "cuda_cache"),
            }
        )
        if self.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.cuda_visible_devices
        if self.config.backend == "cpu":
            env["GLIBC_TUNABLES"] = CPU_MALLOC_TUNABLES
        return env

    def _limits(self) -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
        if self.config.backend == "cpu":
            cap = (self.config.limits.memory_mb + _CPU_ADDRESS_SPACE_EXTRA_MB) << 20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    def start(self) -> Channel:
        """Start the process (once); later calls return the same channel."""
        if self.channel is not None:
            return self.channel
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        widen_pipe(to_child_w)
        widen_pipe(from_child_w)
        self.config.build.cache_dir.parent.joinpath("inductor").mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "stdout.log", "wb") as out, open(self.workdir / "stderr.log", "wb") as err:
            self.proc = popen(
                [
                    *self.launcher,
                    sys.executable,
                    "-s",
                    "-m",
                    "rubric_rl.sandbox.run.worker",
                    str(to_child_r),
                    str(from_child_w),
                    *(["--ahead"] if self.ahead else []),
                    *(["--compiles"] if self.ahead and self.compiles else []),
                    *(["--launched"] if self.launcher else []),
                ],
                cwd=self.workdir,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=(to_child_r, from_child_w),
                start_new_session=True,
                preexec_fn=self._limits,
            )
        os.close(to_child_r)
        os.close(from_child_w)
        self.channel = Channel(from_child_r, to_child_w, max_blob_bytes=MAX_MESSAGE_BYTES)
        self._monitor = threading.Thread(target=self._watch_memory, name="worker-memory", daemon=True)
        self._monitor.start()
        return self.channel

    def _group_rss_mb(self) -> float:
        assert self.proc is not None
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / (1 << 20)

    def _watch_memory(self) -> None:
        while not self._stop_monitor.wait(0.05):
            if self.proc is None or self.proc.poll() is not None:
                return
            rss = self._group_rss_mb()
            self.peak_rss_mb = max(self.peak_rss_mb, rss)
            if rss > self.config.limits.memory_mb:
                self.memory_exceeded = True
                self.kill()
                return

    def where(self) -> str:
        """Ask a live worker for its Python stacks (it dumps them to stderr) and return the innermost frames.

        Nothing for a launched worker: the process started here is its launcher, which SIGUSR1 would hit instead."""
        if self.launcher or not self.alive() or self.proc is None:
            return ""
        try:
            os.kill(self.proc.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return ""
        time.sleep(0.5)
        try:
            text = (self.workdir / "stderr.log").read_text(errors="replace")
        except OSError:
            return ""
        dump = text[text.rfind("Current thread") :] if "Current thread" in text else ""
        frames = [ln.strip() for ln in dump.splitlines() if ln.strip().startswith("File ")]
        return " <- ".join(frames[:4])[:600]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)

    def wait(self, timeout: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def describe_exit(self) -> str:
        """How the worker ended, in words, with the end of its stderr."""
        code = self.wait(timeout=5.0)
        if self.memory_exceeded:
            what = f"memory limit exceeded (resident memory over {self.config.limits.memory_mb} MB)"
        elif code is None:
            what = "worker did not start"
        elif code < 0:
            sig = signal.Signals(-code)
            what = f"worker killed by {sig.name} ({_SIGNAL_WORDS.get(sig, 'signal')})"
        else:
            what = f"worker exited with status {code} before finishing"
        tail = self.stderr_tail()
        return f"{what}; stderr: {tail}" if tail else what

    def stderr_tail(self, limit: int = 1200) -> str:
        try:
            data = (self.workdir / "stderr.log").read_bytes()[-limit:]
        except OSError:
            return ""
        lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip() and "Warning" not in ln]
        return " | ".join(lines[-6:])[-limit:]

    def settle(self) -> None:
        """After a launched worker's last message: let its launcher end by itself (within ``launcher_exit_s``)
        before ``close`` kills what is left, since ncu writes its report only once the worker has exited."""
        if self.launcher and self.proc is not None:
            try:
                self.proc.wait(timeout=self.launcher_exit_s)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        self._stop_monitor.set()
        self.kill()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.channel is not None:
            self.channel.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
