"""Checks on the candidate's C++/CUDA sources, on the exact text that will be compiled.

C++ is not parsed: comments and string literals are removed and the remaining tokens are matched against
named rules. The rules target what a kernel never needs (files, processes, threads, streams of its own,
dispatcher internals, ATen compute, libraries the policy does not allow); the runtime op recorder and the
kernel profile back them up.
"""

from __future__ import annotations

import re

from rubric_rl.sandbox.build.extension import PreparedBuild
from rubric_rl.sandbox.config import SandboxConfig
from rubric_rl.sandbox.verdict import Finding

_COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)

_RULES: list[tuple[str, str, str, re.Pattern[str]]] = [
    (
        "native.os_access",
        "error",
        "uses files, processes, the environment or the network",
        re.compile(
            r"\b(?:system|popen|fork|vfork|execl|execlp|execle|execv|execvp|execve|fopen|freopen|open|openat|"
            r"creat|unlink|remove|rename|getenv|setenv|putenv|socket|connect|dlopen|dlsym|syscall|ptrace|"
            r"mprotect|kill|raise)\s*\(|std::(?:i|o)?fstream|std::filesystem|\bpopen\b|\bFILE\s*\*"
        ),
    ),
    (
        "native.os_headers",
        "error",
        "includes operating-system headers a kernel does not need",
        re.compile(
            r"#\s*include\s*<(?:fstream|unistd\.h|sys/[\w/]+\.h|dlfcn\.h|thread|filesystem|future|"
            r"pthread\.h|spawn\.h|fcntl\.h|netinet/\w+\.h|arpa/\w+\.h|sys/socket\.h)>"
        ),
    ),
    (
        "native.absolute_include",
        "error",
        "includes a file by absolute or parent-relative path",
        re.compile(r'#\s*include\s*["<](?:/|[^">]*\.\./)'),
    ),
    ("native.threads", "error", "starts threads", re.compile(r"std::(?:thread|async|jthread)\b|\bpthread_create\b")),
    (
        "native.stream_creation",
        "error",
        "creates or uses its own CUDA streams",
        re.compile(
            r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bgetStreamFromExternal\b|\bcudaStreamPerThread\b|"
            r"\bcudaStreamNonBlocking\b|\bcuStreamCreate\w*"
        ),
    ),
    (
        "native.dispatch_escape",
        "error",
        "reaches into the dispatcher or ATen's native internals",
        re.compile(
            r"\bc10::impl::|\bExcludeDispatchKey(?:Set)?Guard\b|\bIncludeDispatchKeyGuard\b|\bDispatchKeySet\b|"
            r"\bAutoDispatchBelow\w*|\bat::native::|\bc10::Dispatcher\b|\bredispatch\b|\bTorchDispatchModeTLS\b|"
            r"\bat::_ops::"
        ),
    ),
    (
        "native.aten_compute",
        "error",
        "calls ATen/PyTorch compute from C++ instead of a kernel",
        re.compile(
            r"\b(?:at|torch)::(?:nn::functional::\w+|matmul|mm|bmm|addmm|addmv|baddbmm|mv|dot|einsum|linear|"
            r"conv[123]d|conv_transpose[123]d|convolution|relu|gelu|silu|sigmoid|tanh|softmax|log_softmax|exp|log|"
            r"sum|mean|amax|amin|argmax|argmin|max_pool[123]d|avg_pool[123]d|adaptive_avg_pool[123]d|"
            r"adaptive_max_pool[123]d|batch_norm|layer_norm|group_norm|instance_norm|dropout|pow|sqrt|rsqrt|abs|"
            r"clamp|add|sub|mul|div|cumsum|cumprod|topk|sort|where|masked_fill|gather|scatter|index_select|cat|"
            r"stack|logsumexp|prod|var|std|norm|hardtanh|leaky_relu|elu|selu|softplus|mish|hardswish|"
            r"hardsigmoid|upsample_\w+|interpolate|embedding|cross_entropy|nll_loss|mse_loss|kl_div|triu|tril|"
            r"flip|roll|scaled_dot_product_attention|lstm|gru|pad|outer|minimum|maximum|max|min|neg|erf|"
            r"reciprocal|square)\s*\(|"
            r"\.\s*(?:matmul|mm|bmm|addmm|baddbmm|einsum|conv2d|softmax|log_softmax|relu|relu_|gelu|silu|"
            r"sigmoid|tanh|logsumexp|cumsum|layer_norm|batch_norm|index_select|masked_fill|scatter_add|"
            r"gather|topk|argmax|argmin|amax|amin)\s*\("
        ),
    ),
]
_LIBRARY_CALLS = {
    "cublas": re.compile(r"\bcublas(?!Lt)\w*\s*\(|\bat::cuda::blas::"),
    "cublasLt": re.compile(r"\bcublasLt\w*\s*\("),
    "cudnn": re.compile(r"\bcudnn\w+\s*\("),
    "curand": re.compile(r"\bcurand(?:Create|Generate|SetPseudo|Destroy)\w*\s*\("),
    "cufft": re.compile(r"\bcufft\w+\s*\("),
}
_GLOBAL = re.compile(r"\b__global__\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_FIRST_CALLABLE = re.compile(r"(\w+)\s*\(")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def strip_comments_and_strings(code: str) -> str:
    """Blank out comments and literals but keep line numbers (newlines survive)."""
    return _COMMENTS_AND_STRINGS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)


def kernel_names(sources: list[str]) -> set[str]:
    """Names of the ``__global__`` functions defined in the sources."""
    names: set[str] = set()
    for src in sources:
        clean = strip_comments_and_strings(src)
        for m in _GLOBAL.finditer(clean):
            head = _LAUNCH_BOUNDS.sub(" ", clean[m.end() : m.end() + 400])
            name = _FIRST_CALLABLE.search(head)
            if name:
                names.add(name.group(1))
    return names


def _candidate_line(candidate: str | None, source: str, offset_line: int) -> int | None:
    if candidate is None:
        return None
    pos = candidate.find(source)
    if pos < 0:
        return None
    return candidate.count("\n", 0, pos) + offset_line


def check_native_sources(build: PreparedBuild, candidate: str | None, config: SandboxConfig) -> list[Finding]:
    """Findings on the sources of one prepared build."""
    findings: list[Finding] = []
    seen: set[tuple[str, int | None]] = set()
    sources = [*build.cpp_sources, *build.cuda_sources]
    disallowed = {lib: rx for lib, rx in _LIBRARY_CALLS.items() if lib not in config.policy.allowed_libraries}
    for src in sources:
        clean = strip_comments_and_strings(src)
        # Include directives name their file in a literal: match them with only the comments removed.
        no_comments = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)
        checks: list[tuple[str, str, str, re.Pattern[str]]] = [*_RULES]
        checks += [
            ("native.library_call", "error", f"calls {lib} directly (not allowed by the policy)", rx)
            for lib, rx in disallowed.items()
        ]
        for rule, default, message, rx in checks:
            severity = config.policy.severity(rule, default)  # type: ignore[arg-type]
            if severity == "off":
                continue
            text = no_comments if rule in ("native.absolute_include", "native.os_headers") else clean
            for m in rx.finditer(text):
                line_in_source = clean.count("\n", 0, m.start()) + 1
                line = _candidate_line(candidate, src, line_in_source)
                key = (rule, line if line is not None else line_in_source)
                if key in seen:
                    continue
                seen.add(key)
                evidence = src.splitlines()[line_in_source - 1].strip() if src.splitlines() else m.group(0)
                findings.append(
                    Finding(
                        rule=rule,
                        severity=severity,
                        source="native",
                        message=message,
                        line=line,
                        evidence=evidence[:300],
                    )
                )
    if build.backend == "cuda" and build.with_cuda and not kernel_names(build.cuda_sources):
        severity = config.policy.severity("native.no_kernel", "error")
        if severity != "off":
            findings.append(
                Finding(
                    rule="native.no_kernel",
                    severity=severity,
                    source="native",
                    message="the CUDA sources define no __global__ kernel",
                )
            )
    return findings
