from pathlib import Path

from rubric_rl.sandbox.build.compile_log import MAX_ERRORS, build_source_map, digest_compiler_output

CANDIDATE = '''import torch
cuda_src = """
__global__ void k(float* x) {
    x[0] = y;
}
"""
'''
CUDA_CHUNK = "\n__global__ void k(float* x) {\n    x[0] = y;\n}\n"


def test_nvcc_error_maps_to_candidate_line(tmp_path: Path):
    (tmp_path / "cuda.cu").write_text(
        "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + CUDA_CHUNK
    )
    smap = build_source_map(tmp_path, CANDIDATE, [], [CUDA_CHUNK])
    log = f'{tmp_path}/cuda.cu(6): error: identifier "y" is undefined\n1 error detected\nninja: build stopped'
    assert digest_compiler_output(log, smap) == 'candidate line 4: error: identifier "y" is undefined'


def test_gcc_error_in_generated_code_and_linker():
    log = "main.cpp:40:5: error: 'f' was not declared in this scope\n/usr/bin/ld: undefined reference to `g()'\n"
    out = digest_compiler_output(log, None)
    assert out.splitlines() == [
        "main.cpp:40: error: 'f' was not declared in this scope",
        "link: undefined reference to `g()'",
    ]


def test_bounded_and_deduplicated():
    log = "\n".join(f"main.cpp:{i}:1: error: " + "x" * 1000 for i in range(50)) + "\nmain.cpp:1:1: error: " + "x" * 1000
    out = digest_compiler_output(log)
    assert len(out.splitlines()) == MAX_ERRORS
    assert all(len(line) <= 300 for line in out.splitlines())


def test_unrecognised_output_keeps_the_tail():
    assert digest_compiler_output("something\nbad happened\n").startswith("build failed: something | bad happened")
