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
        peak = torch.cuda.max_memory_reserved(0)
        torch.cuda.empty_cache()
        nan = float("nan")
        # Blocks still cached (free pieces of segments that kept outputs hold): each filled in place, the
        # largest first so that the allocator's best fit hands every request its own block.
        held = [
            torch.empty(size // 4, dtype=torch.float32, device=self.device).fill_(nan)
            for size in cached_free_blocks(
                torch.cuda.memory_snapshot(), device=0, stream=torch.cuda.current_stream(0).cuda_stream
            )
        ]
        # Memory given back to the driver: as much as the phase held at its peak beyond what it holds now, so
        # fresh allocations that land on the same physical memory read NaN. (The old size, peak less allocated,
        # counted the cached blocks twice: beside kept outputs it overran a worker's memory fraction.)
        free, _ = torch.cuda.mem_get_info(0)
        released = released_poison_blocks(peak_reserved=peak, reserved=torch.cuda.memory_reserved(0), free=free)
        held += [torch.empty(size // 4, dtype=torch.float32, device=self.device).fill_(nan) for size in released]
        torch.cuda.synchronize()
        del held
        torch.cuda.empty_cache()

    def describe(self) -> dict[str, Any]:
        import torch

        props = torch.cuda.get_device_properties(0)
        return {"device": props.name, "arch": f"{props.major}.{props.minor}", "cuda": torch.version.cuda}


def cached_free_blocks(snapshot: list[dict[str, Any]], *, device: int, stream: int) -> list[int]:
    """Sizes of the free blocks the caching allocator's default pool holds for ``stream`` on ``device``, from
    ``torch.cuda.memory_snapshot()``, largest first: the blocks a request on that stream can be served from."""
    sizes = [
        block["size"]
        for segment in snapshot
        if segment["device"] == device and segment["stream"] == stream and tuple(segment["segment_pool_id"]) == (0, 0)
        for block in segment["blocks"]
        if block["state"] == "inactive"
    ]
    return sorted(sizes, reverse=True)


# torch's caching allocator: requests up to 1 MiB share 2 MiB segments (kSmallSize); a larger one under 10 MiB
# (kMinLargeAlloc) gets a segment of 20 MiB, which a worker at its peak may have no room for.
_SMALL_SIZE = 1 << 20
_MIN_LARGE_ALLOC = 10 << 20


def released_poison_blocks(*, peak_reserved: int, reserved: int, free: int) -> list[int]:
    """Blocks that poison the memory a worker gave back to the driver: as many bytes as its peak reservation less
    what it still reserves (at most 80% of the device's free memory). One block where that makes a segment of its
    own size, else 1 MiB blocks, which fill 2 MiB segments exactly, so the reservation returns to the peak and no
    higher: the peak fitted the worker's memory fraction, so the poison does too."""
    nbytes = min(peak_reserved - reserved, int(free * 0.8))
    if nbytes >= _MIN_LARGE_ALLOC:
        return [nbytes // 512 * 512]
    return [_SMALL_SIZE] * max(0, nbytes // _SMALL_SIZE)
