"""A precompiled ``torch/extension.h`` shared by all builds that use the same host flags.

Parsing torch's headers is most of a ``main.cpp`` compile (about 22 s of 23 on one core here). GCC can load a
precompiled header instead, but only when every macro and flag matches, and torch's generated flags define
``TORCH_EXTENSION_NAME`` per extension. The header is therefore precompiled *without* that one define (the
header never uses it), once per flag set, into ``<cache>/pch/<key>/torch/extension.h.gch`` beside a copy of
``extension.h``; builds put ``-I<that dir>`` first, so ``#include <torch/extension.h>`` finds the copy and its
``.gch``. If GCC rejects the PCH it silently reads the copy, which includes the real headers: the result is
the same library either way. Built once under a flock; safe across processes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_NAME_DEFINE = re.compile(r"\s-DTORCH_EXTENSION_NAME=\S+")


def _ninja_var(text: str, name: str) -> str:
    m = re.search(rf"^{name} = (.*)$", text, flags=re.MULTILINE)
    return m.group(1) if m else ""


def _compiler_is_gcc(cxx: str) -> bool:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return False
    return "clang" not in out.lower() and (
        "gcc" in out.lower() or "g++" in out.lower() or "free software" in out.lower()
    )


@dataclass(frozen=True)
class PchPlan:
    """One flag set's PCH: how to build it and where it lives."""

    cxx: str
    cflags: str  # the build's host flags less TORCH_EXTENSION_NAME
    post: str
    header: Path  # torch's extension.h
    include_dir: Path  # <root>/<key>: the copy of extension.h and, once built, its .gch

    @property
    def built(self) -> bool:
        return (self.include_dir / "torch" / "extension.h.gch").exists()


def pch_plan(root: Path, ninja_text: str) -> PchPlan | None:
    """The PCH for this build's host flags, under ``root``; None where the host compiler is not GCC."""
    cxx = _ninja_var(ninja_text, "cxx") or "c++"
    if not _compiler_is_gcc(cxx):
        return None
    import torch.utils.cpp_extension as ce

    cflags = _NAME_DEFINE.sub("", " " + _ninja_var(ninja_text, "cflags")).strip()
    post = _ninja_var(ninja_text, "post_cflags")
    header = Path(ce.include_paths()[0]) / "torch" / "extension.h"
    key = hashlib.sha256("\n".join([cxx, cflags, post, str(header), header.read_text()]).encode()).hexdigest()[:24]
    return PchPlan(cxx, cflags, post, header, root / key)


def ensure_pch(plan: PchPlan, timeout_s: float) -> Path | None:
    """The include directory holding the plan's PCH, built under its lock if nobody has built it yet; None if
    it cannot be built (the build then reads the real headers)."""
    if plan.built:
        return plan.include_dir
    final = plan.include_dir
    root, key = final.parent, final.name
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if plan.built:
            return final
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
        (work / "torch").mkdir()
        shutil.copy(plan.header, work / "torch" / "extension.h")
        target = work / "torch" / "extension.h"
        cmd = f"{plan.cxx} {plan.cflags} -x c++-header {target} -o {target}.gch {plan.post}"
        proc = subprocess.run(cmd, shell=True, capture_output=True, timeout=timeout_s, check=False)
        if proc.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            return None
        os.rename(work, final)
        return final
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        os.close(fd)


def use_pch(build_directory: str, include_dir: Path) -> None:
    """Put the PCH directory first on the host compiler's include path in this build's ninja file (replaced
    whole: a ninja already compiling the kernels reads either version, and their rule has no host flags)."""
    path = Path(build_directory, "build.ninja")
    text = re.sub(r"^cflags = ", f"cflags = -I{include_dir} ", path.read_text(), count=1, flags=re.MULTILINE)
    staged = path.with_name("build.ninja.pch")
    staged.write_text(text)
    os.replace(staged, path)
