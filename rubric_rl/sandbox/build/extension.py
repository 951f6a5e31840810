"""What a candidate asked ``load_inline`` to build, and what the evaluator will actually build.

The candidate's ``load_inline(...)`` call is intercepted in the execution worker and turned into an
``ExtensionSpec`` (its sources and wishes). ``prepare_build`` then applies the evaluator's rules: the
evaluator's optimisation and architecture flags, candidate flags only from an allowlist, linked libraries
only as the policy allows. The resulting ``PreparedBuild`` is what is compiled and what the cache key hashes.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from rubric_rl.sandbox.config import SandboxConfig

# Candidate compiler flags that change nothing the evaluator must control (arch, optimisation level, include
# paths, output files). Anything else is dropped and reported.
_ALLOWED_COMPILE_FLAGS = [
    r"--?use_fast_math",
    r"--expt-relaxed-constexpr",
    r"--expt-extended-lambda",
    r"--extended-lambda",
    r"-std=c\+\+(14|17|20)",
    r"-D[A-Za-z_]\w*(=[\w.+-]*)?",
    r"-U[A-Za-z_]\w*",
    r"-lineinfo",
    r"--?maxrregcount=\d+",
    r"-Xptxas=(-v|-O[0-3]|--warn-on-spills|-dlcm=c[ag])",
    r"--ptxas-options=(-v|-O[0-3])",
    r"-ftz=(true|false)",
    r"-prec-(div|sqrt)=(true|false)",
    r"--fmad=(true|false)",
    r"-fopenmp",
    r"-funroll-loops",
    r"-ffast-math",
    r"-fno-math-errno",
    r"-Xcompiler=(-fopenmp|-O3|-ffast-math|-funroll-loops|-fno-math-errno)",
]
_ALLOWED_COMPILE_RE = re.compile("^(" + "|".join(_ALLOWED_COMPILE_FLAGS) + ")$")
_LIBRARY_FLAGS = {
    "cublas": "-lcublas",
    "cublasLt": "-lcublasLt",
    "cudnn": "-lcudnn",
    "curand": "-lcurand",
    "cufft": "-lcufft",
}
_ALWAYS_ALLOWED_LDFLAGS = {"-lcuda", "-fopenmp", "-lgomp"}
_FLAGS_WITH_ARGUMENT = {"-Xptxas", "-Xcompiler", "-maxrregcount", "--maxrregcount"}
# Host optimisation of a split build's .cpp (torch glue and bindings only): with the shared PCH its compile took
# 10.3 s at -O3 and 6.7 s at -O1 on 2 cores (KernelBench L2-40's candidate); a bound call's host overhead moved by
# under 0.1 us.
SPLIT_GLUE_OPT_LEVEL = "-O1"

# Flags every build gets, whatever the candidate asks: all candidates are built alike, so no candidate gains by its
# choice of optimisation level. torch's default load_inline (and KernelBench's scripts, which use it) leaves host code
# at gcc's -O0 when the candidate names no level; for a launch-bound program that is visible in its speedup: L1-12's
# argument checks, allocation and launch took 11 us less a call at -O3 on an H100 host, its speedup 1.09 -> 1.27
# under the sandbox protocol (scripts/bench_agreement.py --builds default,evaluator_flags; docs/measurements.md).
EVALUATOR_FLAGS: dict[str, dict[str, list[str]]] = {
    "cpu": {"cflags": ["-O3", "-fopenmp"], "cuda_cflags": [], "ldflags": ["-fopenmp"]},
    "cuda": {"cflags": ["-O3"], "cuda_cflags": ["-O3"], "ldflags": []},
}


class ExtensionSpec(BaseModel):
    """The arguments of one intercepted ``load_inline`` call (sources as the candidate wrote them)."""

    name: str
    cpp_sources: list[str] = Field(default_factory=list)
    cuda_sources: list[str] = Field(default_factory=list)
    functions: list[str] | dict[str, str] | None = None
    extra_cflags: list[str] = Field(default_factory=list)
    extra_cuda_cflags: list[str] = Field(default_factory=list)
    extra_ldflags: list[str] = Field(default_factory=list)
    extra_include_paths: list[str] = Field(default_factory=list)
    with_cuda: bool | None = None
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False
    is_python_module: bool = True


class PreparedBuild(BaseModel):
    """Exactly what is compiled: the cache key is a hash of this and of the toolchain."""

    name: str
    backend: str
    cpp_sources: list[str]
    cuda_sources: list[str]
    functions: list[str] | dict[str, str] | None
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    with_cuda: bool
    with_pytorch_error_handling: bool
    no_implicit_headers: bool
    arch_list: str | None
    split_sources: bool = False
    dropped_flags: list[str] = Field(default_factory=list)


class SpecError(ValueError):
    """The load_inline call cannot be built as asked (reported as a compile error)."""


_LOAD_INLINE_PARAMS = (
    "name",
    "cpp_sources",
    "cuda_sources",
    "sycl_sources",
    "functions",
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_sycl_cflags",
    "extra_ldflags",
    "extra_include_paths",
    "build_directory",
    "verbose",
    "with_cuda",
    "with_sycl",
    "is_python_module",
    "with_pytorch_error_handling",
    "keep_intermediates",
    "use_pch",
    "no_implicit_headers",
)


def _str_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise SpecError(f"load_inline: {field} must be a string or a list of strings, not {type(value).__name__}")


def spec_from_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ExtensionSpec:
    """Turn the positional/keyword arguments of a ``load_inline`` call into a spec (validating types)."""
    if len(args) > len(_LOAD_INLINE_PARAMS):
        raise SpecError("load_inline: too many positional arguments")
    bound = dict(zip(_LOAD_INLINE_PARAMS, args, strict=False))
    for k, v in kwargs.items():
        if k not in _LOAD_INLINE_PARAMS:
            raise SpecError(f"load_inline: unexpected keyword argument {k!r}")
        if k in bound:
            raise SpecError(f"load_inline: got multiple values for {k!r}")
        bound[k] = v
    if "name" not in bound or not isinstance(bound["name"], str) or not re.fullmatch(r"[A-Za-z_]\w*", bound["name"]):
        raise SpecError("load_inline: name must be a valid identifier string")
    if "cpp_sources" not in bound:
        raise SpecError("load_inline: cpp_sources is required")
    if _str_list(bound.get("sycl_sources"), "sycl_sources"):
        raise SpecError("load_inline: sycl_sources are not supported by this sandbox")
    functions = bound.get("functions")
    if isinstance(functions, str):
        functions = [functions]
    if functions is not None and not (
        (isinstance(functions, (list, tuple)) and all(isinstance(f, str) for f in functions))
        or (
            isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items())
        )
    ):
        raise SpecError("load_inline: functions must be a list of names or a dict of name -> docstring")
    return ExtensionSpec(
        name=bound["name"],
        cpp_sources=_str_list(bound.get("cpp_sources"), "cpp_sources"),
        cuda_sources=_str_list(bound.get("cuda_sources"), "cuda_sources"),
        functions=list(functions) if isinstance(functions, tuple) else functions,
        extra_cflags=_str_list(bound.get("extra_cflags"), "extra_cflags"),
        extra_cuda_cflags=_str_list(bound.get("extra_cuda_cflags"), "extra_cuda_cflags"),
        extra_ldflags=_str_list(bound.get("extra_ldflags"), "extra_ldflags"),
        extra_include_paths=_str_list(bound.get("extra_include_paths"), "extra_include_paths"),
        with_cuda=bound.get("with_cuda"),
        with_pytorch_error_handling=bool(bound.get("with_pytorch_error_handling", True)),
        no_implicit_headers=bool(bound.get("no_implicit_headers", False)),
        is_python_module=bool(bound.get("is_python_module", True)),
    )


def _join_flag_arguments(flags: list[str]) -> list[str]:
    """Split on whitespace, then join ['-Xptxas', '-v'] into '-Xptxas=-v' so each flag is judged whole."""
    tokens = [t for f in flags for t in f.split()]
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] in _FLAGS_WITH_ARGUMENT and i + 1 < len(tokens):
            out.append(f"{tokens[i]}={tokens[i + 1]}")
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


def _filter_compile_flags(flags: list[str], dropped: list[str]) -> list[str]:
    kept = []
    for f in _join_flag_arguments(flags):
        if _ALLOWED_COMPILE_RE.match(f):
            kept.append(f)
        elif f:
            dropped.append(f)
    return kept


def _dedupe(flags: list[str]) -> list[str]:
    return list(dict.fromkeys(flags))


def prepare_build(
    spec: ExtensionSpec, config: SandboxConfig, arch_list: str | None, *, split_sources: bool | None = None
) -> PreparedBuild:
    """Apply the evaluator's build rules to a candidate's spec (``split_sources`` overrides the config)."""
    from rubric_rl.sandbox.build.source_split import split_glue_from_kernels

    if not spec.is_python_module:
        raise SpecError("load_inline: is_python_module=False is not supported (bind functions with functions=[...])")
    backend = config.backend
    split_sources = config.build.split_sources if split_sources is None else split_sources
    with_cuda = bool(spec.cuda_sources) if spec.with_cuda is None else bool(spec.with_cuda)
    if backend == "cpu" and (spec.cuda_sources or with_cuda):
        raise SpecError("load_inline: CUDA sources cannot be built for the cpu backend; write C++ (cpp_sources)")
    dropped: list[str] = [f"include path {p}" for p in spec.extra_include_paths]
    evaluator = EVALUATOR_FLAGS[backend]
    cpp_sources, cuda_sources, split = list(spec.cpp_sources), list(spec.cuda_sources), False
    no_implicit_headers = spec.no_implicit_headers
    if split_sources and with_cuda and not spec.no_implicit_headers:
        result = split_glue_from_kernels(cpp_sources, cuda_sources, spec.functions)
        if result is not None:
            # The split files carry their own includes: torch's headers go to the .cpp only.
            cpp_sources, cuda_sources, split, no_implicit_headers = result.cpp_sources, result.cuda_sources, True, True
    host_flags = evaluator["cflags"]
    if split:
        # The split .cpp holds only host glue (argument checks, allocation, launches) and the bindings: its
        # optimisation level changes a call's host overhead by under 0.1 us, and the build's time by a quarter
        # (SPLIT_GLUE_OPT_LEVEL). The kernels keep nvcc's -O3.
        host_flags = [SPLIT_GLUE_OPT_LEVEL if f == "-O3" else f for f in host_flags]
    cflags = _dedupe(host_flags + _filter_compile_flags(spec.extra_cflags, dropped))
    cuda_cflags = _dedupe(evaluator["cuda_cflags"] + _filter_compile_flags(spec.extra_cuda_cflags, dropped))
    # Linking the CUDA math libraries is harmless; calling them is what the policy polices (native.library_call
    # statically, kernels.library_kernels at run time).
    allowed_ld = _ALWAYS_ALLOWED_LDFLAGS | set(_LIBRARY_FLAGS.values())
    ldflags = list(evaluator["ldflags"])
    for f in _join_flag_arguments(spec.extra_ldflags):
        (ldflags if f in allowed_ld else dropped).append(f)
    return PreparedBuild(
        name=spec.name,
        backend=backend,
        cpp_sources=cpp_sources,
        cuda_sources=cuda_sources,
        functions=spec.functions,
        cflags=cflags,
        cuda_cflags=cuda_cflags,
        ldflags=_dedupe(ldflags),
        with_cuda=with_cuda,
        with_pytorch_error_handling=spec.with_pytorch_error_handling,
        no_implicit_headers=no_implicit_headers,
        arch_list=arch_list if with_cuda else None,
        split_sources=split,
        dropped_flags=dropped,
    )
