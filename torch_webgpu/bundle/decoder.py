"""A loaded decode bundle (compiler/export/decoder.py) and its own `generate`, without torch: the prefill
plan of the prompt's bucket fills the KV cache, then one decode plan per token; the cache and the logits
stay on the device (DeviceArrays handed from plan to plan), the device sampler (kernels/sampling.py)
picks each token there, and only the token id (4 bytes) is read back per step.

A bundle exported with a tokenizer (tokenizer.json + tokenizer_config.json, bundle/tokenizer.py) takes
and gives text too: `generate("text")`, `chat(messages)`, streamed as text pieces.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from torch_webgpu.kernels.launch import record
from torch_webgpu.kernels.sampling import SampleProblem, sample_launch
from torch_webgpu.plan import DeviceArray, Plan, lowering
from torch_webgpu.plan.device_array import free_all
from torch_webgpu.plan.memory import enabled as plan_memory_enabled
from torch_webgpu.plan.memory import shared_slot_sizes

from . import messages
from .format import BundleFormatError, BundleSignatureError, materialize
from .requirements import check_requirements
from .tokenizer import BundleTokenizer

WEIGHTS_FILE = "weights.safetensors"
_SCORES = {"float32": "f32", "float16": "f16"}


def _sampler_source(path: Path, info: Mapping[str, Any], files: Mapping[str, bytes], logits_dtype: str) \
        -> str | None:
    """The bundle's own sampler WGSL, which the page runs too (None in bundles older than it: the kernel
    library's, the same source, is used)."""
    sampler = info.get("sampler")
    if sampler is None:
        return None
    if sampler.get("dtype") != logits_dtype or sampler.get("wgsl") not in files:
        raise BundleFormatError(f"{path.name}: the manifest's sampler {sampler} does not match the bundle "
                                f"({logits_dtype} logits); re-export it")
    return files[sampler["wgsl"]].decode()


def _tokenizer_source(path: Path, info: Mapping[str, Any], files: Mapping[str, bytes]) -> tuple | None:
    """(tokenizer.json bytes, tokenizer_config.json bytes, their names) of a bundle exported with a
    tokenizer, else None."""
    entry = info.get("tokenizer")
    if entry is None:
        return None
    names = (entry.get("json"), entry.get("config"))
    missing = [n for n in names if n not in files]
    if missing:
        raise BundleFormatError(f"{path.name}: the manifest's tokenizer names {missing}, which the bundle "
                                "does not list; re-export it")
    return files[names[0]], files[names[1]], names


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
        self._sampler_wgsl = _sampler_source(path, info, files, self._logits_dtype)
        self._tokenizer_files = _tokenizer_source(path, info, files)
        self._tokenizer: BundleTokenizer | None = None
        self._running = False

    @property
    def tokenizer(self) -> BundleTokenizer | None:
        """The bundle's tokenizer (read on first use; needs the `tokenizers` package), None in a bundle
        exported without one."""
        if self._tokenizer is None and self._tokenizer_files is not None:
            data, config, names = self._tokenizer_files
            self._tokenizer = BundleTokenizer(data, config, where=self.path.name, files=names)
        return self._tokenizer

    def text_tokenizer(self) -> BundleTokenizer:
        """The tokenizer, or the error a bundle exported without one gives for text."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            raise BundleSignatureError(messages.NO_TOKENIZER.format(bundle=self.path.name))
        return tokenizer

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
        raise BundleSignatureError(messages.PROMPT_OVER_BUCKET.format(bundle=self.path.name, length=length,
                                                                      largest=self.buckets[-1]))

    def _pick(self, logits: DeviceArray, step: int, do_sample: bool, temperature: float, top_k: int,
              top_p: float, seed: int) -> int:
        """Sample (or take the argmax of) the logits on the device; read back the token id only."""
        mode = "logits" if do_sample else "greedy"
        problem = SampleProblem(mode, self._logits_dtype, 1, self.vocab_size, temperature=temperature,
                                top_k=top_k, top_p=top_p)
        rng = (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF, step, 0)
        launch = sample_launch(problem, rng)
        if self._sampler_wgsl is not None:
            launch = dataclasses.replace(launch, wgsl=self._sampler_wgsl)
        record(launch, {"x": logits.buffer, "out": self._token.buffer}, self.rt)
        return int(self.rt.download_array(self._token.buffer, np.int32, 1)[0])

    def _check_prompt(self, ids: np.ndarray, max_new_tokens: int | None) -> int:
        """The number of new tokens to generate (BundleSignatureError for a prompt that cannot run)."""
        length = int(ids.size)
        if max_new_tokens is None:
            max_new_tokens = max(self.max_len - length, 0)
        if length == 0 or max_new_tokens < 0:
            raise BundleSignatureError(messages.EMPTY_PROMPT.format(bundle=self.path.name))
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise BundleSignatureError(messages.PROMPT_IDS_RANGE.format(bundle=self.path.name,
                                                                        vocab_size=self.vocab_size))
        if length + max_new_tokens > self.max_len:
            raise BundleSignatureError(messages.PROMPT_OVER_MAX_LEN.format(
                bundle=self.path.name, length=length, new_tokens=max_new_tokens, max_len=self.max_len))
        self._bucket(length)
        return max_new_tokens

    def _tokens(self, ids: np.ndarray, max_new_tokens: int, do_sample: bool, temperature: float, top_k: int,
                top_p: float, seed: int, stop_at_eos: bool) -> Iterator[int]:
        """The new token ids one by one, as the device picks them (prompt checked by _check_prompt)."""
        if max_new_tokens == 0:
            return
        if self._running:
            raise BundleSignatureError(messages.GENERATION_RUNNING.format(bundle=self.path.name))
        self._running = True
        length = int(ids.size)
        bucket = self._bucket(length)
        padded = np.zeros((1, bucket), dtype=np.int64)
        padded[0, :length] = ids
        logits = cache = None
        try:
            logits, cache = self.plans[f"prefill-{bucket}"].run_resident(
                [padded, np.array([length - 1], dtype=np.int64)], resident=(0, 1))
            for step in range(max_new_tokens):
                token = self._pick(logits, step, do_sample, temperature, top_k, top_p, seed)
                yield token
                if (stop_at_eos and token in self.eos_token_ids) or step == max_new_tokens - 1:
                    break
                position = np.array([length + step], dtype=np.int64)
                new_logits, new_cache = self.plans["decode"].run_resident([self._token, position, cache],
                                                                          resident=(0, 1))
                logits.release()
                cache.release()
                logits, cache = new_logits, new_cache
        finally:
            if logits is not None:
                logits.release()
                cache.release()
            self._running = False

    def generate(self, prompt: str | Sequence[int] | np.ndarray, max_new_tokens: int | None = None, *,
                 do_sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int = 0, stop_at_eos: bool = True, stream: bool = False,
                 streamer: Callable[[Any], Any] | None = None, skip_special_tokens: bool = True) -> Any:
        """Greedy decoding, or sampled with temperature / top-k / top-p like transformers' `do_sample=True`,
        for up to `max_new_tokens` tokens (default: until the KV cache is full) or an end-of-sequence id.

        Token ids in (`prompt` a sequence of ints): the prompt followed by the new tokens, as int64 [1, n]
        (transformers' layout). Text in (a bundle exported with a tokenizer): the generated text — the
        continuation only, without the prompt, decoded with `skip_special_tokens` (so no end-of-sequence
        token); the prompt is encoded with the tokenizer's special tokens (e.g. a bos token).

        `stream=True` returns an iterator instead, of text pieces as tokens arrive (text in) or of the new
        token ids (ids in); `streamer` is called with each piece (or id) as it arrives. Text pieces never
        split a character and concatenate to the text. One generation runs at a time on a bundle."""
        options = dict(do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                       stop_at_eos=stop_at_eos)
        if isinstance(prompt, str):
            ids = self.text_tokenizer().encode(prompt)
            return self._text(ids, max_new_tokens, options, stream, streamer, skip_special_tokens)
        ids = np.asarray(prompt, dtype=np.int64).reshape(-1)
        new_tokens = self._check_prompt(ids, max_new_tokens)
        tokens = self._tokens(ids, new_tokens, **options)
        if stream:
            return _each(tokens, streamer)
        out = list(ids)
        for token in tokens:
            out.append(token)
            if streamer is not None:
                streamer(token)
        return np.asarray([out], dtype=np.int64)

    def _text(self, ids: list[int], max_new_tokens: int | None, options: dict[str, Any], stream: bool,
              streamer: Callable[[str], Any] | None, skip_special_tokens: bool) -> Any:
        """The continuation of prompt `ids` as text (or an iterator of its pieces)."""
        prompt = np.asarray(ids, dtype=np.int64)
        tokens = self._tokens(prompt, self._check_prompt(prompt, max_new_tokens), **options)
        pieces = self.text_tokenizer().pieces(tokens, skip_special_tokens)
        if stream:
            return _each(pieces, streamer)
        text = []
        for piece in pieces:
            text.append(piece)
            if streamer is not None:
                streamer(piece)
        return "".join(text)

    def chat(self, messages: Sequence[Mapping[str, Any]], max_new_tokens: int | None = None, *,
             do_sample: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
             seed: int = 0, stop_at_eos: bool = True, stream: bool = False,
             streamer: Callable[[str], Any] | None = None, skip_special_tokens: bool = True,
             template_kwargs: Mapping[str, Any] | None = None) -> Any:
        """The assistant's reply to `messages` ([{"role": "user", "content": "..."}, ...]) as text: the chat
        template rendered with a generation prompt (`template_kwargs`: more template variables, e.g.
        tools=[...]) and encoded without added special tokens (the template has them), then generated
        as `generate` does from text (same options; `stream=True` gives the reply's pieces)."""
        tokenizer = self.text_tokenizer()
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, **(template_kwargs or {}))
        options = dict(do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                       stop_at_eos=stop_at_eos)
        return self._text(tokenizer.encode(text, add_special_tokens=False), max_new_tokens, options, stream,
                          streamer, skip_special_tokens)

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


def _each(items: Iterator[Any], callback: Callable[[Any], Any] | None) -> Iterator[Any]:
    """`items`, passing each to `callback` (if any) as it goes by."""
    for item in items:
        if callback is not None:
            callback(item)
        yield item
