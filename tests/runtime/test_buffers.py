"""Buffer pool, upload/download round trips, fill and copy on the real device."""

import numpy as np
import pytest

from torch_webgpu.runtime import LimitExceededError
from torch_webgpu.runtime.buffers import bucket_size

SIZES = [1, 3, 4, 5, 255, 256, 257, 4096, 65537, 1 << 20, (3 << 20) + 7]


@pytest.mark.parametrize("nbytes", SIZES)
def test_round_trip_sizes(rt, nbytes):
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    buf = rt.allocate(nbytes)
    rt.upload(buf, data)
    assert rt.download(buf) == data.tobytes()
    rt.free(buf)


@pytest.mark.parametrize("offset,length", [(0, 7), (1, 2), (3, 9), (5, 1), (13, 100), (64, 64)])
def test_partial_upload_preserves_neighbours(rt, offset, length):
    base = np.arange(256, dtype=np.uint8)
    patch = np.full(length, 0xAB, dtype=np.uint8)
    buf = rt.allocate(256)
    rt.upload(buf, base)
    rt.upload(buf, patch, offset=offset)
    expected = base.copy()
    expected[offset:offset + length] = patch
    assert rt.download(buf) == expected.tobytes()
    assert rt.download(buf, offset, length) == patch.tobytes()
    rt.free(buf)


def test_upload_after_recorded_work_keeps_program_order(rt):
    a, b = rt.allocate(64), rt.allocate(64)
    rt.upload(a, np.full(16, 1, np.uint32))
    rt.copy(a, b)                          # recorded, not submitted
    rt.upload(a, np.full(16, 2, np.uint32))  # must land after the copy
    assert (rt.download_array(b, np.uint32, 16) == 1).all()
    assert (rt.download_array(a, np.uint32, 16) == 2).all()


def test_fill_and_copy_ranges(rt):
    buf = rt.allocate(1024)
    rt.fill(buf, 0)
    rt.fill(buf, 0x3F800000, offset=16, nbytes=64)
    out = rt.download_array(buf, np.float32, 256)
    assert (out[4:20] == 1.0).all() and (out[:4] == 0).all() and (out[20:] == 0).all()
    dst = rt.allocate(1024)
    rt.fill(dst, 0xFFFFFFFF)
    rt.copy(buf, dst, nbytes=64, src_offset=16, dst_offset=512)
    words = rt.download_array(dst, np.uint32, 256)
    assert (words[128:144] == 0x3F800000).all() and (words[:128] == 0xFFFFFFFF).all()


def test_large_fill_uses_2d_grid(rt):
    words = 70000 * 256 + 5  # more workgroups than fit in one dimension
    buf = rt.allocate(words * 4)
    rt.fill(buf, 7)
    out = rt.download_array(buf, np.uint32, words)
    assert (out == 7).all()
    rt.free(buf)


@pytest.mark.parametrize("offset, nbytes", [(2, 2), (6, 2), (1, 4), (3, 9), (2, 1030)])
def test_unaligned_fill_keeps_neighbouring_bytes(rt, offset, nbytes):
    """An f16 scalar (2 bytes at a half-word) or any byte range: the pattern's first byte lands at
    `offset`, bytes outside the range keep their values."""
    buf = rt.allocate(2048)
    rt.fill(buf, 0xA5A5A5A5)
    rt.fill(buf, 0x44332211, offset=offset, nbytes=nbytes)
    got = np.frombuffer(rt.download(buf, 0, 2048), np.uint8)
    want = np.full(2048, 0xA5, np.uint8)
    want[offset:offset + nbytes] = np.resize(np.array([0x11, 0x22, 0x33, 0x44], np.uint8), nbytes)
    np.testing.assert_array_equal(got, want)
    rt.free(buf)


def test_out_of_range_access_raises(rt):
    buf = rt.allocate(16)
    with pytest.raises(ValueError, match="outside buffer"):
        rt.download(buf, 8, 16)


def test_oversized_buffer_raises_limit_error(rt):
    too_big = rt.pool.max_buffer_size + 4
    with pytest.raises(LimitExceededError, match="max-buffer-size"):
        rt.allocate(too_big)
    buf = rt.allocate(16)  # the runtime is still usable
    rt.upload(buf, b"\x01" * 16)
    assert rt.download(buf) == b"\x01" * 16


def test_pool_reuses_freed_buffers(rt):
    created = rt.pool.created
    for _ in range(50):
        rt.free(rt.allocate(3000))
    assert rt.pool.created - created <= 1
    assert bucket_size(3000) == 4096


def test_memory_stats_return_to_baseline(rt):
    before = rt.memory_stats()["allocated"]
    ids = [rt.allocate(1000) for _ in range(10)]
    assert rt.memory_stats()["allocated"] > before
    for i in ids:
        rt.free(i)
    assert rt.memory_stats()["allocated"] == before
