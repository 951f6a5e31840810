"""One extension build: ``run_forked`` in a job the build job server forked, or by hand as
``python -m rubric_rl.sandbox.build.compile_job REQUEST.json``.

It drives torch's own ``load_inline`` machinery (source assembly, bindings, ninja file, flags) into a build
directory the builder chose, with these changes: the built library is not imported here (loading untrusted
native code is the execution worker's business, inside its sandbox), and in ``objects`` mode only the object
files are compiled (a compile-only check that needs no CUDA runtime and no GPU). It writes ``result.json``
into the build directory. With ``pch_root`` set, the host compiler loads a shared precompiled
``torch/extension.h`` (see ``rubric_rl.sandbox.build.pch``). It runs in its own session so that the builder
can kill the whole compiler tree on timeout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO


def _ninja_runner(mode: str, pch_root: str | None, pch_timeout_s: float):
    """Stands in for torch's ``_run_ninja_build``: optional PCH, optional objects-only, same error contract.

    While this build makes the shared PCH, the objects that do not include it (the CUDA sources: nvcc, no host
    flags) are compiled beside it. A build that finds another one making it reads the real headers instead of
    waiting (see ``rubric_rl.sandbox.build.pch``)."""

    def ninja(build_directory: str, targets: list[str]) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
        command = ["ninja", "-v", *targets]
        if os.environ.get("MAX_JOBS"):
            command += ["-j", os.environ["MAX_JOBS"]]
        log = tempfile.TemporaryFile()  # not a pipe: nobody reads it while the build waits for the PCH
        return subprocess.Popen(command, cwd=build_directory, stdout=log, stderr=subprocess.STDOUT), log

    def finish(started: tuple[subprocess.Popen[bytes], IO[bytes]], error_prefix: str) -> None:
        proc, log = started
        with log:
            if proc.wait() != 0:
                log.seek(0)
                raise RuntimeError(f"{error_prefix}: {log.read().decode(errors='replace')}")

    def run(build_directory: str, verbose: bool, error_prefix: str) -> None:
        text = Path(build_directory, "build.ninja").read_text()
        main_cpp = Path(build_directory, "main.cpp")
        objects = re.findall(r"^build (\S+\.o): (\S+)", text, flags=re.MULTILINE)
        if pch_root and main_cpp.exists() and main_cpp.read_text().startswith("#include <torch/extension.h>"):
            from rubric_rl.sandbox.build.pch import claim_pch, make_pch, pch_plan, use_pch

            plan = pch_plan(Path(pch_root), text)
            if plan is not None:
                with claim_pch(plan) as ours:
                    if ours:
                        early = [o for o, rule in objects if rule == "cuda_compile"]
                        kernels = ninja(build_directory, early) if early else None
                        include_dir = make_pch(plan, pch_timeout_s)
                        if kernels is not None:
                            finish(kernels, error_prefix)
                    else:  # built already, or being made by another build: then the real headers
                        include_dir = plan.include_dir if plan.built else None
                if include_dir is not None:
                    use_pch(build_directory, include_dir)
        finish(ninja(build_directory, [o for o, _ in objects] if mode == "objects" else []), error_prefix)

    return run


def find_cuda_home() -> str | None:
    """The CUDA toolkit root: CUDA_HOME/CUDA_PATH, nvcc's installation, or /usr/local/cuda."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates += [str(Path(nvcc).resolve().parent.parent), str(Path(nvcc).parent.parent)]
    candidates.append("/usr/local/cuda")
    for c in candidates:
        if c and Path(c, "include", "cuda_runtime.h").exists():
            return c
    return None


def main(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    build = request["build"]
    build_dir = request["build_dir"]
    started = time.monotonic()
    result: dict[str, object] = {"ok": False}
    # Diagnostics: whether the fork server had imported torch's build machinery, and the CPUs the job ran on.
    job = {
        "preloaded": "torch.utils.cpp_extension" in sys.modules,
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    from torch.utils import cpp_extension as ce

    built: dict[str, str] = {}

    def _record_instead_of_import(module_name: str, path: str, is_python_module: bool) -> str:
        built["module_name"] = module_name
        return path

    if not hasattr(ce, "_import_module_from_library") or not hasattr(ce, "_run_ninja_build"):
        raise RuntimeError("this torch's cpp_extension lacks the hooks rubric-rl builds through; update rubric-rl")
    ce._import_module_from_library = _record_instead_of_import
    ce._run_ninja_build = _ninja_runner(request["mode"], request.get("pch_root"), request.get("pch_timeout_s", 600))
    if build["with_cuda"] and ce.CUDA_HOME is None:
        cuda_home = find_cuda_home()
        if cuda_home is None:
            Path(build_dir, "result.json").write_text(
                json.dumps({"ok": False, "infra_error": "no CUDA toolkit found (nvcc with include/cuda_runtime.h)"})
            )
            return 0
        ce.CUDA_HOME = cuda_home  # CPU torch: a compile-only check needs the toolkit, not a CUDA torch
    try:
        ce.load_inline(
            name=build["name"],
            cpp_sources=list(build["cpp_sources"]),
            cuda_sources=list(build["cuda_sources"]) or None,
            functions=build["functions"],
            extra_cflags=build["cflags"],
            extra_cuda_cflags=build["cuda_cflags"],
            extra_ldflags=build["ldflags"],
            build_directory=build_dir,
            verbose=False,
            with_cuda=build["with_cuda"],
            with_pytorch_error_handling=build["with_pytorch_error_handling"],
            no_implicit_headers=build["no_implicit_headers"],
            keep_intermediates=True,
        )
        result = {"ok": True, "module_name": built.get("module_name", build["name"])}
    except Exception as e:  # the compiler's verdict on candidate code: reported, not raised
        result = {"ok": False, "log": str(e)}
    result["seconds"] = time.monotonic() - started
    result["job"] = job
    Path(build_dir, "result.json").write_text(json.dumps(result))
    return 0


def run_forked(request_path: str, env: dict[str, str], log_path: str, cores: list[int] | None) -> None:
    """``main`` in a job forked by the build job server (``rubric_rl.sandbox.build.job_server``): a session of its
    own (the builder kills the whole compiler tree on timeout), output into ``log_path``, the builder's
    environment and CPUs as they are now, not as they were when the server started."""
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    os.environ.clear()
    os.environ.update(env)
    code = main(request_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing of the server's state to tear down


if __name__ == "__main__":
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.dirname(sys.argv[1]))
    sys.exit(main(sys.argv[1]))
