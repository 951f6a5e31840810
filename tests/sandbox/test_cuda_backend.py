"""The cuda backend's memory poisoning, sized from allocator numbers (pure arithmetic: runs without a GPU)."""

import pytest

from rubric_rl.sandbox.backends.cuda import cached_free_blocks, released_poison_blocks

MiB = 1 << 20
GiB = 1 << 30


def _segment(blocks, *, device=0, stream=0, pool=(0, 0)):
    return {
        "device": device,
        "stream": stream,
        "segment_pool_id": pool,
        "total_size": sum(size for size, _ in blocks),
        "blocks": [{"size": size, "state": state} for size, state in blocks],
    }


def test_cached_free_blocks_are_the_default_pools_inactive_blocks_of_the_stream_largest_first():
    snapshot = [
        _segment([(256 * MiB, "active_allocated"), (6 * MiB, "inactive"), (250 * MiB, "inactive")]),
        _segment([(512, "inactive"), (1536, "active_allocated")]),
        _segment([(64 * MiB, "inactive")], stream=7),  # another stream's: a request here is not served from it
        _segment([(32 * MiB, "inactive")], pool=(1, 0)),  # a private pool (CUDA graphs)
        _segment([(16 * MiB, "inactive")], device=1),
        _segment([(8 * MiB, "active_awaiting_free")]),
    ]
    assert cached_free_blocks(snapshot, device=0, stream=0) == [250 * MiB, 6 * MiB, 512]
    assert cached_free_blocks([], device=0, stream=0) == []


def test_released_memory_is_poisoned_up_to_the_peak_and_no_higher():
    # The H100 run that failed at 688d44f: a worker limited to 4.25 GiB kept 7 x 256 MB outputs (1.93 GiB
    # allocated) beside 688 MiB of cached pieces; the old block, peak less allocated, asked 1.69 GiB more and
    # overran the limit. Released memory is the peak less what is still reserved.
    allocated, cached = int(1.93 * GiB) // (2 * MiB) * 2 * MiB, 688 * MiB
    reserved = allocated + cached
    peak = allocated + int(1.69 * GiB) // (2 * MiB) * 2 * MiB
    blocks = released_poison_blocks(peak_reserved=peak, reserved=reserved, free=70 * GiB)
    assert blocks == [peak - reserved]
    assert reserved + sum(blocks) <= peak < 4.25 * GiB


@pytest.mark.parametrize(
    "peak, reserved, free, blocks",
    [
        (100 * MiB, 40 * MiB, 10 * GiB, [60 * MiB]),
        # Under 10 MiB a block would get a 20 MiB segment of its own: 1 MiB blocks fill 2 MiB segments exactly.
        (46 * MiB, 40 * MiB, 10 * GiB, [MiB] * 6),
        (40 * MiB, 40 * MiB, 10 * GiB, []),
        (40 * MiB, 42 * MiB, 10 * GiB, []),  # reserving more than the recorded peak: nothing was given back
        # Other workers hold most of the device: at most 80% of what is free.
        (10 * GiB, 0, 1 * GiB, [int(0.8 * GiB) // 512 * 512]),
    ],
)
def test_released_poison_blocks(peak, reserved, free, blocks):
    assert released_poison_blocks(peak_reserved=peak, reserved=reserved, free=free) == blocks
