"""Digesting compiler output: the first errors, bounded, with file/line mapped back to the candidate.

torch writes the candidate's ``cpp_sources`` into ``main.cpp`` and its ``cuda_sources`` into ``cuda.cu`` (with
headers and bindings around them). A g++ error ``main.cpp:57:3: error: ...`` or an nvcc error
``cuda.cu(12): error: ...`` is mapped to the line of the candidate program where that source text stands,
when the text can be found there verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MAX_ERRORS = 8
MAX_LINE_CHARS = 300
MAX_DIGEST_CHARS = 4000

_GCC = re.compile(
    r"(?P<file>[^\s:()]+\.(?:cpp|cu|h|cuh)):(?P<line>\d+)(?::\d+)?:\s*(?P<kind>fatal error|error):\s*(?P<msg>.*)"
)
_NVCC = re.compile(r"(?P<file>[^\s:()]+\.(?:cu|cuh|cpp|h))\((?P<line>\d+)\):\s*(?P<kind>error)\s*:?\s*(?P<msg>.*)")
_LINKER = [
    re.compile(p)
    for p in (r"(undefined reference to .*)", r"(undefined symbol: .*)", r"ld: (.*)", r"(collect2: error: .*)")
]
_FILE_ROLE = {"main.cpp": "cpp source", "cuda.cu": "cuda source"}


@dataclass
class SourceMap:
    """Where each generated file's lines come from in the candidate program."""

    candidate: str | None
    files: dict[str, str]  # generated file name -> its text
    chunks: dict[str, list[str]]  # generated file name -> the candidate's source strings written into it

    def locate(self, file_name: str, line: int) -> str:
        text = self.files.get(file_name)
        role = _FILE_ROLE.get(file_name, file_name)
        if text is None:
            return f"{role} line {line}"
        for chunk in self.chunks.get(file_name, []):
            start = text.find(chunk)
            if start < 0:
                continue
            first = text.count("\n", 0, start) + 1
            last = first + chunk.count("\n")
            if first <= line <= last:
                offset = line - first
                if self.candidate is not None:
                    pos = self.candidate.find(chunk)
                    if pos >= 0:
                        return f"candidate line {self.candidate.count(chr(10), 0, pos) + 1 + offset}"
                return f"{role} line {offset + 1}"
        return f"{role} line {line} (generated code)"


def build_source_map(
    build_dir: Path, candidate: str | None, cpp_sources: list[str], cuda_sources: list[str]
) -> SourceMap:
    files = {}
    for name in ("main.cpp", "cuda.cu"):
        p = build_dir / name
        if p.exists():
            files[name] = p.read_text(errors="replace")
    return SourceMap(candidate=candidate, files=files, chunks={"main.cpp": cpp_sources, "cuda.cu": cuda_sources})


def digest_compiler_output(log: str, source_map: SourceMap | None = None) -> str:
    """The first compiler/linker errors as 'where: message' lines, bounded in count and length."""
    errors: list[str] = []
    seen: set[str] = set()
    for raw in log.splitlines():
        line = raw.strip()
        m = _GCC.search(line) or _NVCC.search(line)
        if m:
            name = Path(m.group("file")).name
            where = source_map.locate(name, int(m.group("line"))) if source_map else f"{name}:{m.group('line')}"
            entry = f"{where}: {m.group('kind')}: {m.group('msg').strip()}"
        else:
            lm = next((m for m in (rx.search(line) for rx in _LINKER) if m), None)
            if not lm:
                continue
            entry = f"link: {lm.group(1)}"
        entry = entry[:MAX_LINE_CHARS]
        if entry not in seen:
            seen.add(entry)
            errors.append(entry)
        if len(errors) >= MAX_ERRORS:
            break
    if not errors:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-6:]
        errors = ["build failed: " + " | ".join(t.strip()[:MAX_LINE_CHARS] for t in tail)] if tail else ["build failed"]
    return "\n".join(errors)[:MAX_DIGEST_CHARS]
