"""A precompiled ``torch/extension.h`` shared by all builds that use the same host flags.

Parsing torch's headers is most of a ``main.cpp`` compile (about 22 s of 23 on one core here). GCC can load a
precompiled header instead, but only when every macro and flag matches, and torch's generated flags define
``TORCH_EXTENSION_NAME`` per extension. The header is therefore precompiled *without* that one define (the
header never uses it), once per flag set, into ``<cache>/pch/<key>/torch/extension.h.gch`` beside a copy of
``extension.h``; builds put ``-I<that dir>`` first, so ``#include <torch/extension.h>`` finds the copy and its
``.gch``. If GCC rejects the PCH it silently reads the copy, which includes the real headers: the result is
the same library either way. Built once, by the build that takes its flock; safe across processes.

A build that finds another one making the PCH does not wait for it: it reads the real headers. On a cold cache
every build of the first wave used to wait for the PCH, built under the load of all the others: on a 16-core
H100 host those builds took 54-62 s each (7 at a time: 54-56 s), while the builds after them took 8-20 s, and
the GPU had nothing to run until the first wave was done. Reading the headers costs a build about 22 s of one
core, once per build of that wave.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def claim_pch(plan: PchPlan) -> Iterator[bool]:
    """Whether this build is to make the plan's PCH: True while it holds the PCH's lock and nobody has built it;
    False where it is built already or another build holds the lock (making it: this build does not wait)."""
    if plan.built:
        yield False
        return
    root = plan.include_dir.parent
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f"{plan.include_dir.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield not plan.built
    finally:
        os.close(fd)


def make_pch(plan: PchPlan, timeout_s: float) -> Path | None:
    """Build the plan's PCH (the caller holds its lock: ``claim_pch``); its include directory, or None if it
    cannot be built (the build then reads the real headers)."""
    final = plan.include_dir
    root, key = final.parent, final.name
    try:
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


def use_pch(build_directory: str, include_dir: Path) -> None:
    """Put the PCH directory first on the host compiler's include path in this build's ninja file (replaced
    whole: a ninja already compiling the kernels reads either version, and their rule has no host flags)."""
    path = Path(build_directory, "build.ninja")
    text = re.sub(r"^cflags = ", f"cflags = -I{include_dir} ", path.read_text(), count=1, flags=re.MULTILINE)
    staged = path.with_name("build.ninja.pch")
    staged.write_text(text)
    os.replace(staged, path)
