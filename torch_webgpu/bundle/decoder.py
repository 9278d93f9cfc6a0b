"""A loaded decode bundle (compiler/export/decoder.py) and its own `generate`, without torch: the prefill
plan of the prompt's bucket fills the KV cache, then one decode plan per token; the cache and the logits
stay on the device (DeviceArrays handed from plan to plan), the device sampler (kernels/sampling.py)
picks each token there, and only the token id (4 bytes) is read back per step.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from torch_webgpu.kernels.launch import record
from torch_webgpu.kernels.sampling import SampleProblem, sample_launch
from torch_webgpu.plan import DeviceArray, Plan, lowering
from torch_webgpu.plan.device_array import free_all
from torch_webgpu.plan.memory import enabled as plan_memory_enabled
from torch_webgpu.plan.memory import shared_slot_sizes

from .format import BundleSignatureError, materialize
from .requirements import check_requirements

WEIGHTS_FILE = "weights.safetensors"
_SCORES = {"float32": "f32", "float16": "f16"}


class DecoderBundle:
    """A decode bundle bound to the runtime: `generate(prompt_ids, max_new_tokens, ...)`."""

    def __init__(self, path: Path, manifest: dict[str, Any], files: dict[str, bytes], rt: Any = None):
        from safetensors.numpy import load as load_safetensors

        from torch_webgpu.runtime import get_runtime

        self.path, self.manifest = path, manifest
        self.rt = rt = rt or get_runtime()
        check_requirements(manifest["requires"], rt.info.limits, rt.info.features,
                           what=f"this adapter ({rt.info.name})")
        info = manifest["decoder"]
        self.max_len, self.buckets = int(info["max_len"]), [int(b) for b in info["prompt_buckets"]]
        self.vocab_size, self.eos_token_ids = int(info["vocab_size"]), [int(e) for e in info["eos_token_ids"]]
        arrays = load_safetensors(files[WEIGHTS_FILE])
        self.weight_buffers: dict[str, int] = {}   # model weight -> its one device buffer (every plan's)
        self.plans: dict[str, Any] = {}
        wgsl = {name: data for name, data in files.items() if name.endswith(".wgsl")}
        with materialize(wgsl) as directory:
            plans = {name: Plan.from_doc(copy.deepcopy(phase["plan"]), directory)
                     for name, phase in info["phases"].items()}
        # The phases run one at a time (outputs are copied out): their per-call buffers share storage.
        self.slot_buffers: dict[str, int] = {}
        if plan_memory_enabled():
            self.slot_buffers = {slot: rt.allocate(size, exact=True)
                                 for slot, size in shared_slot_sizes(list(plans.values())).items()}
            self._slot_finalizer = weakref.finalize(self, free_all, rt, list(self.slot_buffers.values()))
        for name, phase in info["phases"].items():
            plan = plans[name]
            plan.constants = {const: arrays[key] for const, key, _ in phase["constants"]}
            shared = {}
            for const, key, is_weight in phase["constants"][:plan.num_constant_inputs]:
                if is_weight:
                    shared[const] = self._weight_buffer(key, arrays[key])
            self.plans[name] = lowering(plan, rt, constant_buffers=shared, slot_buffers=self.slot_buffers)
        self._logits_dtype = _SCORES[info["phases"]["decode"]["outputs"][0]["dtype"]]
        self._token = DeviceArray(rt, rt.allocate(4), (1, 1), "int32")

    def _weight_buffer(self, key: str, value: np.ndarray) -> int:
        if key not in self.weight_buffers:
            buf = self.rt.allocate(max(value.nbytes, 4))
            self.rt.upload(buf, np.ascontiguousarray(value))
            self.weight_buffers[key] = buf
        return self.weight_buffers[key]

    @property
    def device_bytes(self) -> int:
        """Bytes of the device buffers the loaded bundle holds: shared weights and every plan's own
        buffers (transients, its constants, a KV cache's in/out slots); a running generate adds one cache
        and one logits row."""
        owned = {b for compiled in self.plans.values() for b in compiled.buffers.owned}
        owned |= set(self.weight_buffers.values()) | set(self.slot_buffers.values())
        return sum(self.rt.buffer(b).nbytes for b in owned)

    def _bucket(self, length: int) -> int:
        for bucket in self.buckets:
            if length <= bucket:
                return bucket
        raise BundleSignatureError(f"{self.path.name}: a prompt of {length} tokens is longer than the "
                                   f"largest prefill bucket ({self.buckets[-1]}); re-export with a larger "
                                   "prompt_buckets entry")

    def _pick(self, logits: DeviceArray, step: int, do_sample: bool, temperature: float, top_k: int,
              top_p: float, seed: int) -> int:
        """Sample (or take the argmax of) the logits on the device; read back the token id only."""
        mode = "logits" if do_sample else "greedy"
        problem = SampleProblem(mode, self._logits_dtype, 1, self.vocab_size, temperature=temperature,
                                top_k=top_k, top_p=top_p)
        rng = (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF, step, 0)
        record(sample_launch(problem, rng), {"x": logits.buffer, "out": self._token.buffer}, self.rt)
        return int(self.rt.download_array(self._token.buffer, np.int32, 1)[0])

    def generate(self, prompt_ids: Sequence[int] | np.ndarray, max_new_tokens: int, *,
                 do_sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int = 0,
                 stop_at_eos: bool = True) -> np.ndarray:
        """The prompt followed by up to `max_new_tokens` tokens, as int64 [1, n] (transformers' layout):
        greedy, or sampled with temperature / top-k / top-p like transformers' `do_sample=True`."""
        ids = np.asarray(prompt_ids, dtype=np.int64).reshape(-1)
        length = int(ids.size)
        if length == 0 or max_new_tokens < 0:
            raise BundleSignatureError("generate needs a non-empty prompt and max_new_tokens >= 0")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise BundleSignatureError(f"prompt ids must lie in [0, {self.vocab_size})")
        if length + max_new_tokens > self.max_len:
            raise BundleSignatureError(f"{length} prompt + {max_new_tokens} new tokens exceed the bundle's "
                                       f"max_len {self.max_len} (its KV cache); re-export with a larger "
                                       "max_len")
        bucket = self._bucket(length)
        padded = np.zeros((1, bucket), dtype=np.int64)
        padded[0, :length] = ids
        out = list(ids)
        if max_new_tokens == 0:
            return np.asarray([out], dtype=np.int64)
        logits, cache = self.plans[f"prefill-{bucket}"].run_resident(
            [padded, np.array([length - 1], dtype=np.int64)], resident=(0, 1))
        try:
            for step in range(max_new_tokens):
                token = self._pick(logits, step, do_sample, temperature, top_k, top_p, seed)
                out.append(token)
                if (stop_at_eos and token in self.eos_token_ids) or step == max_new_tokens - 1:
                    break
                position = np.array([length + step], dtype=np.int64)
                new_logits, new_cache = self.plans["decode"].run_resident([self._token, position, cache],
                                                                          resident=(0, 1))
                logits.release()
                cache.release()
                logits, cache = new_logits, new_cache
        finally:
            logits.release()
            cache.release()
        return np.asarray([out], dtype=np.int64)

    def release(self) -> None:
        """Give the bundle's device buffers back to the runtime pool."""
        for compiled in self.plans.values():
            compiled.release()
        for buf in self.weight_buffers.values():
            self.rt.free(buf)
        self.weight_buffers.clear()
        if self.slot_buffers:
            self._slot_finalizer()
            self.slot_buffers = {}
        self._token.release()

    def __repr__(self) -> str:
        return (f"<torch_webgpu decode bundle {self.path} max_len {self.max_len} prompt buckets "
                f"{self.buckets}>")
