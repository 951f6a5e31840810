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


def ensure_pch(root: Path, ninja_text: str, timeout_s: float) -> Path | None:
    """The include directory holding a valid PCH for this build's host flags, building it if needed."""
    cxx = _ninja_var(ninja_text, "cxx") or "c++"
    cflags = _NAME_DEFINE.sub("", " " + _ninja_var(ninja_text, "cflags")).strip()
    post = _ninja_var(ninja_text, "post_cflags")
    if not _compiler_is_gcc(cxx):
        return None
    import torch.utils.cpp_extension as ce

    header = Path(ce.include_paths()[0]) / "torch" / "extension.h"
    key = hashlib.sha256("\n".join([cxx, cflags, post, str(header), header.read_text()]).encode()).hexdigest()[:24]
    final = root / key
    if (final / "torch" / "extension.h.gch").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if (final / "torch" / "extension.h.gch").exists():
            return final
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
        (work / "torch").mkdir()
        shutil.copy(header, work / "torch" / "extension.h")
        target = work / "torch" / "extension.h"
        cmd = f"{cxx} {cflags} -x c++-header {target} -o {target}.gch {post}"
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
    """Put the PCH directory first on the host compiler's include path in this build's ninja file."""
    path = Path(build_directory, "build.ninja")
    text = path.read_text()
    path.write_text(re.sub(r"^cflags = ", f"cflags = -I{include_dir} ", text, count=1, flags=re.MULTILINE))
