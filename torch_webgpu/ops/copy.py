"""Copies between CPU and webgpu tensors and on the device, for any strides, offsets and dtypes.

Host -> device: contiguous bytes are uploaded straight into the destination range; other layouts go
through a contiguous device temporary and the strided-copy kernel. Device -> host: a contiguous
source is read back directly, others are first made contiguous on the device. Device -> device is
one strided-copy dispatch (or a buffer-to-buffer copy when both sides are contiguous, word-aligned and
of one dtype); it never goes through the host.
"""

from __future__ import annotations

import torch

from ..runtime.capture import unreplayable
from . import strided
from .dtypes import check_supported
from .registry import register
from .tensor_buffers import (
    buffer_id,
    byte_offset,
    fits_one_binding,
    pack_u32,
    runtime,
    windowed_binding,
)

_COPY_SOURCES: dict[tuple[torch.dtype, torch.dtype], str] = {}


def _copy_wgsl(src: torch.dtype, dst: torch.dtype) -> str:
    key = (src, dst)
    source = _COPY_SOURCES.get(key)
    if source is None:
        s_kind, d_kind = strided.compute_kind(src), strided.compute_kind(dst)
        if src == dst:
            value = "load_raw(se)"
            helpers = ""
        else:
            value = "encode(" + strided.convert_expr("decode(load_raw(se))", s_kind, d_kind) + ")"
            helpers = strided.CONVERT_PRELUDE + strided.decode(src) + strided.encode(dst)
        source = (
            "@group(0) @binding(0) var<storage, read> P: array<u32>;\n"
            "@group(0) @binding(1) var<storage, read> S: array<u32>;\n"
            + strided.dst_decl(2, dst) + "\n" + strided.INDEX_HELPERS + helpers
            + strided.load_raw(src) + strided.store_raw(dst)
            + f"""
@compute @workgroup_size({strided.WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let li = linear_id(gid, nwg);
  if (li >= P[0]) {{ return; }}
  let se = strided_index(li, 2u, {strided.HEADER + 8}u);
  let de = strided_index(li, 3u, {strided.HEADER + 16}u);
  store_raw(de, {value});
}}
""")
        _COPY_SOURCES[key] = source
    return source


def _copy_complex(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copies with a complex64 side, as copies of float32 (real, imag) views; conjugate bits resolved."""
    if dst.is_complex():
        physical = dst.conj() if dst.is_conj() else dst
        dst_pairs = torch.view_as_real(physical)
        if not src.is_complex():  # real -> complex: imaginary part zero
            copy_on_device(src, dst_pairs[..., 0])
            dst_pairs[..., 1].zero_()
            return
        flip = src.is_conj() != dst.is_conj()
        src_pairs = torch.view_as_real(src.conj() if src.is_conj() else src)
        if not flip:
            copy_on_device(src_pairs, dst_pairs)
            return
        copy_on_device(src_pairs[..., 0], dst_pairs[..., 0])
        imag = src_pairs[..., 1]
        if buffer_id(imag) == buffer_id(dst_pairs):
            imag = imag.clone()
        torch.neg(imag, out=dst_pairs[..., 1])
        return
    # complex -> real keeps the real part (torch warns about the discarded imaginary part)
    copy_on_device(torch.view_as_real(src.conj() if src.is_conj() else src)[..., 0], dst)


def copy_on_device(src: torch.Tensor, dst: torch.Tensor) -> None:
    """dst[...] = src[...] for webgpu tensors of one shape (any strides, offsets, dtypes)."""
    if dst.numel() == 0:
        return
    check_supported(src.dtype, "copy")
    check_supported(dst.dtype, "copy")
    if src.shape != dst.shape:
        src = src.expand(dst.shape)
    if src.is_neg() or dst.is_neg():  # negative bits (e.g. the imaginary part of a conjugate view)
        physical = torch._neg_view(dst) if dst.is_neg() else dst
        copy_on_device(torch._neg_view(src) if src.is_neg() else src, physical)
        if src.is_neg() != dst.is_neg():
            pairs = torch.view_as_real(physical.conj() if physical.is_conj() else physical) \
                if physical.is_complex() else physical
            pairs.neg_()
        return
    if src.is_complex() or dst.is_complex():
        _copy_complex(src, dst)
        return
    src_id, dst_id = buffer_id(src), buffer_id(dst)
    rt = runtime()
    if src_id == dst_id:
        if (src.storage_offset(), src.stride(), src.dtype) == (dst.storage_offset(), dst.stride(), dst.dtype):
            return  # the very same elements
        # A buffer cannot be bound for reading and writing at once: copy through a temporary.
        tmp = torch.empty(src.shape, dtype=src.dtype, device=src.device)
        copy_on_device(src, tmp)
        src, src_id = tmp, buffer_id(tmp)
    nbytes = dst.numel() * dst.element_size()
    if (src.dtype == dst.dtype and src.is_contiguous() and dst.is_contiguous()
            and not (byte_offset(src) | byte_offset(dst) | nbytes) % 4):
        rt.copy(src_id, dst_id, nbytes, byte_offset(src), byte_offset(dst))
        return
    if not (fits_one_binding(src) and fits_one_binding(dst)):
        # Views wider than one kernel binding: copy them in halves along the dim that shrinks the wide
        # one's extent most (its largest stride), so a transposed view needs few launches.
        wide = dst if not fits_one_binding(dst) else src
        dim = max(((n - 1) * st, d) for d, (n, st) in enumerate(zip(wide.shape, wide.stride(), strict=True))
                  if n > 1)[1]
        half = dst.shape[dim] // 2
        copy_on_device(src.narrow(dim, 0, half), dst.narrow(dim, 0, half))
        rest = dst.shape[dim] - half
        copy_on_device(src.narrow(dim, half, rest), dst.narrow(dim, half, rest))
        return
    src_binding, src_offset = windowed_binding(src)
    dst_binding, dst_offset = windowed_binding(dst)
    lay = strided.layout(dst.shape, src.stride(), dst.stride(), op="copy_")
    kernel = rt.kernel(_copy_wgsl(src.dtype, dst.dtype), label=f"copy_{src.dtype}_{dst.dtype}")
    params = rt.constant(pack_u32(lay.words([src_offset, dst_offset])))
    rt.dispatch(kernel, [params, src_binding, dst_binding], strided.grid(lay.numel))


def _raw_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor (any dtype, bfloat16 included)."""
    return memoryview(t.contiguous().view(torch.uint8).numpy()).cast("B") if t.numel() else memoryview(b"")


def upload(src: torch.Tensor, dst: torch.Tensor) -> None:
    """dst (webgpu) = src (CPU), converting the dtype on the host.

    Whole-word ranges are written straight into dst's buffer. Anything else (strided views, packed
    dtypes not filling whole u32 words) goes through a word-padded device temporary and the copy kernel,
    so no neighbouring bytes are touched and nothing waits for a read-back.
    """
    if dst.numel() == 0:
        return
    unreplayable()  # the host values are no part of a launch plan's signature
    check_supported(dst.dtype, "copy to webgpu")
    host = src.to(dst.dtype).expand(dst.shape).resolve_conj().resolve_neg().contiguous()
    if dst.is_conj():  # dst's storage holds the conjugates of its values
        host = host.conj().resolve_conj()
    if dst.is_neg():  # ... or their negatives
        host = host.neg()
    nbytes = dst.numel() * dst.element_size()
    if dst.is_contiguous() and not (byte_offset(dst) | nbytes) % 4:
        runtime().upload(buffer_id(dst), _raw_bytes(host.reshape(-1)), byte_offset(dst))
        return
    padded = -(-nbytes // 4) * 4
    staging = torch.empty(padded, dtype=torch.uint8, device=dst.device)
    raw = torch.zeros(padded, dtype=torch.uint8)
    raw[:nbytes] = host.reshape(-1).view(torch.uint8)
    runtime().upload(buffer_id(staging), _raw_bytes(raw), 0)
    copy_on_device(staging[:nbytes].view(dst.dtype).view(dst.shape), dst)


def download(src: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU tensor with the values of a webgpu tensor (same dtype and shape)."""
    if src.numel() == 0:
        return torch.empty(src.shape, dtype=src.dtype)
    check_supported(src.dtype, "copy from webgpu")
    if src.is_conj():  # the storage holds the conjugates: read them, conjugate on the host
        return download(src.conj()).conj().resolve_conj()
    if src.is_neg():  # the storage holds the negated values
        return download(torch._neg_view(src)).neg()
    if not src.is_contiguous():
        src = src.contiguous()
    nbytes = src.numel() * src.element_size()
    raw = runtime().download(buffer_id(src), byte_offset(src), nbytes)
    return torch.frombuffer(bytearray(raw), dtype=src.dtype).reshape(src.shape)


@register("_copy_from")
def _copy_from(self: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """copy_ across devices and on the device (non_blocking is accepted; uploads are queued anyway)."""
    if self.device.type == "webgpu" and dst.device.type == "webgpu":
        copy_on_device(self, dst)
    elif dst.device.type == "webgpu":
        if self.device.type != "cpu":
            self = self.cpu()
        upload(self, dst)
    elif self.device.type == "webgpu":
        check_supported(self.dtype, "copy from webgpu")
        host = download(self)
        dst.copy_(host)
    else:
        raise RuntimeError(f"webgpu _copy_from: unexpected devices {self.device} -> {dst.device}")
    return dst


@register("_copy_from_and_resize")
def _copy_from_and_resize(self: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Resize dst to self's shape, then copy (used by the CPU fallback for out= arguments)."""
    if dst.shape != self.shape:
        dst.resize_(self.shape)
    return _copy_from(self, dst, False)


@register("_local_scalar_dense")
def _local_scalar_dense(self: torch.Tensor) -> int | float | bool:
    """.item(): read one element back."""
    check_supported(self.dtype, "item")
    if self.is_conj():
        return _local_scalar_dense(self.conj()).conjugate()
    raw = runtime().download(buffer_id(self), byte_offset(self), self.element_size())
    return torch.frombuffer(bytearray(raw), dtype=self.dtype).item()
