import pytest

from rubric_rl.sandbox.build.source_split import split_glue_from_kernels

SIMPLE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#define BLOCK 256

__device__ __forceinline__ float relu(float v) { return v > 0.f ? v : 0.f; }

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = relu(x[i]);  // a comment with <<<fake>>>
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

STREAM = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void k(float* y, float a, int n) { int i = threadIdx.x; if (i < n) y[i] = a; }
torch::Tensor fill(torch::Tensor y, double a) {
    k<<<1, 128, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), (float)a, y.numel());
    return y;
}
"""


def test_simple_split():
    out = split_glue_from_kernels(["torch::Tensor relu_cuda(torch::Tensor x);"], [SIMPLE], ["relu_cuda"])
    assert out is not None
    (kernel_file,) = out.cuda_sources
    assert "torch" not in kernel_file.replace("torch::", "").lower() or "#include <torch" not in kernel_file
    assert "#include <torch" not in kernel_file
    assert "__global__ void relu_kernel" in kernel_file and "__device__ __forceinline__ float relu" in kernel_file
    assert "void __rrl_launch_relu_kernel(dim3 __rrl_grid" in kernel_file
    glue = out.cpp_sources[-1]
    assert out.cpp_sources[0] == "#include <torch/extension.h>"
    assert (
        "__rrl_launch_relu_kernel(dim3((n + BLOCK - 1) / BLOCK), dim3(BLOCK), (size_t)(0), (cudaStream_t)(0)," in glue
    )
    assert "<<<" not in glue.replace("<<<fake>>>", "")
    assert "#define BLOCK 256" in kernel_file and "#define BLOCK 256" in glue
    assert "__global__" not in glue


def test_stream_launch_and_torch_includes_go_to_the_glue():
    out = split_glue_from_kernels(["torch::Tensor fill(torch::Tensor y, double a);"], [STREAM], ["fill"])
    assert out is not None
    assert "ATen/cuda/CUDAContext.h" in out.cpp_sources[-1]
    assert "ATen" not in out.cuda_sources[0]
    assert "(cudaStream_t)(at::cuda::getCurrentCUDAStream())" in out.cpp_sources[-1]


@pytest.mark.parametrize(
    "source",
    [
        # template kernels dispatched per dtype
        SIMPLE.replace(
            "__global__ void relu_kernel(const float*",
            "template <typename T>\n__global__ void relu_kernel(const float*",
        ),
        # the kernel's address is taken
        SIMPLE.replace(
            "    return y;\n}",
            "    cudaFuncSetAttribute(relu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);\n    return y;\n}",
        ),
        # conditional compilation
        "#ifdef FAST\n#define X 1\n#endif\n" + SIMPLE,
        # a device variable written from the host
        SIMPLE.replace("#define BLOCK 256", "#define BLOCK 256\n__constant__ float c_scale[1];").replace(
            "    return y;\n}", "    float s = 1; cudaMemcpyToSymbol(c_scale, &s, sizeof(float));\n    return y;\n}"
        ),
        # torch types in a kernel signature
        SIMPLE.replace("const float* __restrict__ x", "torch::PackedTensorAccessor32<float,1> x"),
        # a namespace
        "namespace ops {\n" + SIMPLE + "\n}\n",
        # no launch at all
        "__global__ void k() {}\n",
    ],
)
def test_refuses_when_not_provably_safe(source):
    assert split_glue_from_kernels(["torch::Tensor relu_cuda(torch::Tensor x);"], [source], ["relu_cuda"]) is None
