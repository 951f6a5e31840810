"""Moving the torch glue out of a candidate's ``.cu`` so that nvcc never parses torch's headers.

A typical candidate puts its kernels *and* its ``torch::Tensor`` wrapper in ``cuda_sources``. nvcc then
compiles torch's headers twice over (host and device passes), which is most of a build's time. When it is
provably safe, this rewrite produces:

- a kernel file with only CUDA headers: the candidate's includes that are not torch's, its ``#define``s, its
  device code and kernels, verbatim, plus one plain launcher per kernel,
  ``void __rrl_launch_K(dim3, dim3, size_t, cudaStream_t, <K's parameters>)``;
- the glue, compiled by the host compiler with torch's headers: the candidate's host functions, verbatim
  except that each ``K<<<g, b, s, t>>>(args)`` becomes ``__rrl_launch_K(g, b, s, t, args)``.

"Provably safe" means every condition below holds; otherwise nothing is rewritten (``None``): no templates,
namespaces or conditional compilation at top level; kernels are plain ``__global__`` functions whose
parameters mention no torch types; device code mentions no torch types; host code uses kernels only in
``<<<>>>`` launches and contains no device-only syntax; no ``__host__ __device__`` functions; no device
variables referenced from host code. A split build that fails is rebuilt unsplit by the evaluator, so the
rewrite can only change how fast a candidate builds, never its verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10|pybind11|caffe2)/")
_TORCH_TOKENS = re.compile(r"\b(?:torch|at|c10|pybind11|py)::|\bAT_\w+|\bTORCH_\w+|\bC10_\w+|\bscalar_t\b|\bTensor\b")
_DEVICE_ONLY = re.compile(
    r"\b(?:threadIdx|blockIdx|blockDim|gridDim|__syncthreads|__shfl\w*|atomic\w+|__ldg|"
    r"__shared__|warpSize)\b"
)
_LAUNCH_NAME = re.compile(r"(\w+)\s*$")


@dataclass
class SplitSources:
    cpp_sources: list[str]
    cuda_sources: list[str]


@dataclass
class _Item:
    text: str
    kind: str  # "preprocessor" | "block" (ends with {...}) | "statement" (ends with ;)


def _mask(code: str) -> str:
    """Same length as ``code``, with comments and string/char literals blanked (newlines kept)."""
    out = list(code)
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _items(code: str) -> list[_Item] | None:
    """Top-level items of a C++ translation unit, or None if the structure is not simple enough."""
    masked = _mask(code)
    items: list[_Item] = []
    i, n, start = 0, len(code), 0
    depth = 0
    while i < n:
        c = masked[i]
        if depth == 0 and c == "#" and masked[masked.rfind("\n", 0, i) + 1 : i].strip() == "":
            if masked[start:i].strip():
                return None  # a directive in the middle of a declaration
            j = i
            while True:
                e = masked.find("\n", j)
                e = n if e < 0 else e
                if e > 0 and code[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            items.append(_Item(code[i:e], "preprocessor"))
            i = start = e
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                j = i + 1
                while j < n and masked[j] in " \t":
                    j += 1
                if j < n and masked[j] == ";":
                    i = j
                items.append(_Item(code[start : i + 1], "block"))
                start = i + 1
        elif c == ";" and depth == 0:
            items.append(_Item(code[start : i + 1], "statement"))
            start = i + 1
        i += 1
    if depth != 0 or masked[start:].strip():
        return None
    return [it for it in items if _mask(it.text).strip()]


def _head(item: _Item) -> str:
    """The masked text before the first '{' (a block's signature)."""
    m = _mask(item.text)
    return m.split("{", 1)[0]


def _split_params(params: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in params:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _kernel_signature(item: _Item) -> tuple[str, list[str]] | None:
    head = _head(item)
    m = re.search(
        r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        r"(\w+)\s*\((.*)\)\s*$",
        head,
        re.DOTALL,
    )
    if m is None:
        return None
    params = [p for p in _split_params(item.text[m.start(2) : m.end(2)]) if p and p != "void"]
    return m.group(1), params


def _param_name(param: str, index: int) -> tuple[str, str]:
    """(declaration with a name, the name)."""
    tokens = re.findall(r"\w+", param)
    builtin = {
        "const",
        "volatile",
        "unsigned",
        "signed",
        "int",
        "float",
        "double",
        "char",
        "short",
        "long",
        "bool",
        "__restrict__",
        "__restrict",
        "size_t",
        "int64_t",
        "int32_t",
        "uint32_t",
        "uint64_t",
        "int8_t",
        "uint8_t",
        "int16_t",
        "uint16_t",
        "half",
        "__half",
        "__nv_bfloat16",
        "float2",
        "float4",
        "int2",
        "int4",
        "half2",
        "__half2",
        "void",
    }
    if tokens and tokens[-1] not in builtin and len(tokens) > 1:
        return param, tokens[-1]
    name = f"__rrl_arg{index}"
    return f"{param} {name}", name


def _replace_launches(host: str, kernels: dict[str, list[str]]) -> str | None:
    """Rewrite every ``K<<<...>>>(...)`` of host code into a launcher call; None if something is off."""
    masked = _mask(host)
    out: list[str] = []
    pos = 0
    while True:
        i = masked.find("<<<", pos)
        if i < 0:
            break
        m = _LAUNCH_NAME.search(masked[:i])
        if m is None or m.group(1) not in kernels:
            return None
        j = masked.find(">>>", i)
        if j < 0:
            return None
        config = _split_params(host[i + 3 : j])
        if not 2 <= len(config) <= 4:
            return None
        k = j + 3
        while k < len(masked) and masked[k].isspace():
            k += 1
        if k >= len(masked) or masked[k] != "(":
            return None
        depth, e = 0, k
        while e < len(masked):
            if masked[e] == "(":
                depth += 1
            elif masked[e] == ")":
                depth -= 1
                if depth == 0:
                    break
            e += 1
        else:
            return None
        args = host[k + 1 : e].strip()
        grid, block = config[0], config[1]
        smem = config[2] if len(config) > 2 else "0"
        stream = config[3] if len(config) > 3 else "0"
        call = f"__rrl_launch_{m.group(1)}(dim3({grid}), dim3({block}), (size_t)({smem}), (cudaStream_t)({stream})"
        call += f", {args})" if args else ")"
        out.append(host[pos : m.start(1)])
        out.append(call)
        pos = e + 1
    out.append(host[pos:])
    return "".join(out)


def split_glue_from_kernels(
    cpp_sources: list[str], cuda_sources: list[str], functions: list[str] | dict[str, str] | None
) -> SplitSources | None:
    """The split described in the module docstring, or None when it is not provably safe."""
    code = "\n".join(cuda_sources)
    if "<<<" not in code:
        return None
    items = _items(code)
    if items is None:
        return None
    parts = _Parts()
    if not all(_sort_item(item, parts) for item in items):
        return None
    if not parts.kernels or not parts.host or not _host_only_launches_kernels(parts):
        return None
    rewritten_host = [_replace_launches(h, parts.kernels) for h in parts.host]
    if any(r is None for r in rewritten_host):
        return None
    launchers = [_launcher(name, params) for name, params in parts.kernels.items()]
    kernel_file = [
        "#include <cuda_runtime.h>",
        *parts.includes_cu,
        *parts.defines,
        *parts.shared_types,
        *parts.device,
        *parts.kernel_items,
        *(definition for definition, _ in launchers),
    ]
    glue = [
        "#include <cuda_runtime.h>",
        *parts.includes_cu,
        *parts.includes_cpp,
        *parts.defines,
        *parts.shared_types,
        *(declaration for _, declaration in launchers),
        *(r for r in rewritten_host if r is not None),
    ]
    return SplitSources(
        cpp_sources=["#include <torch/extension.h>", *cpp_sources, "\n".join(glue) + "\n"],
        cuda_sources=["\n".join(kernel_file) + "\n"],
    )


@dataclass
class _Parts:
    """A translation unit's top-level items sorted by where they go: the kernel file, the glue, or both."""

    includes_cu: list[str] = field(default_factory=list)  # both
    includes_cpp: list[str] = field(default_factory=list)  # torch's: the glue
    defines: list[str] = field(default_factory=list)  # both
    shared_types: list[str] = field(default_factory=list)  # host-only types: both
    device: list[str] = field(default_factory=list)  # device code, pragmas, types with device members: kernels
    kernels: dict[str, list[str]] = field(default_factory=dict)  # name -> parameters
    kernel_items: list[str] = field(default_factory=list)  # the kernels' text: the kernel file
    host: list[str] = field(default_factory=list)  # host functions: the glue, launches rewritten
    device_vars: set[str] = field(default_factory=set)  # device variables, which host code must not name


def _sort_item(item: _Item, parts: _Parts) -> bool:
    """File one top-level item into ``parts``; False when it makes the split unsafe."""
    masked = _mask(item.text)
    if item.kind == "preprocessor":
        return _sort_directive(item, masked, parts)
    head = _head(item) if item.kind == "block" else masked
    if re.search(r"\b(?:template|namespace)\b", head):
        return False
    if "__global__" in head:
        sig = _kernel_signature(item)
        if sig is None or _TORCH_TOKENS.search(masked):
            return False
        parts.kernels[sig[0]] = sig[1]
        parts.kernel_items.append(item.text)
    elif re.search(r"\b__host__\b", head):
        return False
    elif re.search(r"\b(?:__device__|__constant__|__managed__)\b", head):
        if _TORCH_TOKENS.search(masked):
            return False
        parts.device.append(item.text)
        if item.kind == "statement":
            parts.device_vars |= set(re.findall(r"(\w+)\s*(?:\[[^\]]*\])*\s*(?:=[^;]*)?;", masked))
    elif re.match(r"\s*(?:typedef|using|struct|class|union|enum|(?:static\s+)?(?:constexpr|const)\s)", head):
        if _TORCH_TOKENS.search(masked):
            return False
        if _DEVICE_ONLY.search(masked) or "__device__" in masked:
            parts.device.append(item.text)  # a type with device members: the kernel file's alone
        else:
            parts.shared_types.append(item.text)
    else:
        if _DEVICE_ONLY.search(masked):
            return False
        parts.host.append(item.text)
    return True


def _sort_directive(item: _Item, masked: str, parts: _Parts) -> bool:
    """File an ``#include``, ``#define`` or ``#pragma``; False for any other directive (conditional compilation)."""
    directive = masked.strip()
    if directive.startswith("#include") or re.match(r"#\s*include", directive):
        (parts.includes_cpp if _TORCH_INCLUDE.search(item.text) else parts.includes_cu).append(item.text.strip())
    elif re.match(r"#\s*define", directive):
        if _TORCH_TOKENS.search(masked):
            return False
        parts.defines.append(item.text.strip())
    elif re.match(r"#\s*pragma", directive):
        parts.device.append(item.text.strip())
    else:
        return False
    return True


def _host_only_launches_kernels(parts: _Parts) -> bool:
    """Host code names each kernel only in its ``<<<>>>`` launches, and no device variable at all."""
    glue_masked = _mask("\n".join(parts.host))
    for name in parts.kernels:
        uses = len(re.findall(rf"\b{re.escape(name)}\b", glue_masked))
        launches = len(re.findall(rf"\b{re.escape(name)}\s*<<<", glue_masked))
        if uses != launches:
            return False  # the host takes the kernel's address (cudaFuncSetAttribute...) or launches a template
    return not any(re.search(rf"\b{re.escape(v)}\b", glue_masked) for v in parts.device_vars)


def _launcher(name: str, params: list[str]) -> tuple[str, str]:
    """The plain launcher of kernel ``name`` (for the kernel file) and its declaration (for the glue)."""
    named = [_param_name(p, i) for i, p in enumerate(params)]
    decl_params = ", ".join(
        [
            "dim3 __rrl_grid",
            "dim3 __rrl_block",
            "size_t __rrl_smem",
            "cudaStream_t __rrl_stream",
            *[d for d, _ in named],
        ]
    )
    arg_names = ", ".join(n for _, n in named)
    definition = (
        f"void __rrl_launch_{name}({decl_params}) {{\n"
        f"  {name}<<<__rrl_grid, __rrl_block, __rrl_smem, __rrl_stream>>>({arg_names});\n}}"
    )
    return definition, f"void __rrl_launch_{name}({decl_params});"
