"""Device backends of the execution worker: what differs between running on a GPU and on the CPU."""

from rubric_rl.sandbox.backends.base import DeviceBackend


def make_backend(name: str) -> DeviceBackend:
    if name == "cuda":
        from rubric_rl.sandbox.backends.cuda import CudaBackend

        return CudaBackend()
    if name == "cpu":
        from rubric_rl.sandbox.backends.cpu import CpuBackend

        return CpuBackend()
    raise ValueError(f"unknown backend {name!r} (expected 'cuda' or 'cpu')")


__all__ = ["DeviceBackend", "make_backend"]
