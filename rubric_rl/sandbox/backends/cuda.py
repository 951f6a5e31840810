"""CUDA backend: device-wide synchronisation around host timing, L2 flush, allocator poisoning."""

from __future__ import annotations

from typing import Any

from rubric_rl.sandbox.backends.base import DeviceBackend


class CudaBackend(DeviceBackend):
    name = "cuda"
    device = "cuda:0"
    timer = "host_sync"

    def __init__(self) -> None:
        self._flush_buffer: Any = None

    def setup(self, *, memory_fraction: float, threads: int | None) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("the cuda backend needs a CUDA device, and torch sees none")
        torch.cuda.set_device(0)
        torch.cuda.set_per_process_memory_fraction(memory_fraction, 0)
        if threads:
            torch.set_num_threads(threads)
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
        # Writing twice the L2 evicts everything the previous call left there.
        self._flush_buffer = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=self.device)

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()  # the whole device: work the candidate put on other streams counts

    def flush_cache(self) -> None:
        if self._flush_buffer is not None:
            self._flush_buffer.zero_()

    def seed(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)

    def poison_free_memory(self) -> None:
        import torch

        torch.cuda.synchronize()
        reserved = torch.cuda.max_memory_reserved(0)
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(0)
        # What the reference phase used and gave back: its peak less what it still holds (outputs kept on the
        # device). The peak itself, beside those, overran a worker's memory fraction below the whole device.
        nbytes = min(reserved - torch.cuda.memory_allocated(0), int(free * 0.8))
        if nbytes >= 4:
            # One block over the memory the reference phase used: fresh allocations that land on the same
            # physical memory read NaN, not the reference's results.
            block = torch.empty(nbytes // 4, dtype=torch.float32, device=self.device)
            block.fill_(float("nan"))
            torch.cuda.synchronize()
            del block
        torch.cuda.empty_cache()

    def reset_peak_memory(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats(0)

    def describe(self) -> dict[str, Any]:
        import torch

        props = torch.cuda.get_device_properties(0)
        return {"device": props.name, "arch": f"{props.major}.{props.minor}", "cuda": torch.version.cuda}
