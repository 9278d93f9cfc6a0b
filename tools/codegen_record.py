"""Pytest plugin: record every WGSL source compiled and every plan lowered, per test, as sha256 hashes.

The evidence that a refactor left generated code unchanged: run the same tests before and after with
`CODEGEN_RECORD=DIR python -m pytest -p tools.codegen_record ...`, then
`python -m tools.codegen_record compare BEFORE_DIR AFTER_DIR`. Each xdist worker writes
`DIR/<worker>.json`: {test id: {"wgsl": [sha256...], "plans": [sha256...]}}. Variant and kernel names
are left out on purpose (a rename is not a change of code); a plan is hashed as its plan.json document
with every WGSL file's hash in place of its name and every library variant's name replaced by its
executable's identity (`plan_hash`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

_current: list[str] = ["<collection>"]
_seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"wgsl": set(), "plans": set()})


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else bytes(data)).hexdigest()


def plan_hash(plan) -> str:
    """The plan's document, name-free, hashed: WGSL file names replaced by their sources' hashes, and every
    kernel-library executable (whose key, `lib_<variant>_<digest>`, and whose tuning entries carry the
    variant's name) by an identity made of its WGSL and its spec, so renaming a variant changes nothing."""
    doc = _name_free(plan.to_doc(), {name: _sha(src) for name, src in plan.wgsl.items()})
    return _sha(json.dumps(doc, sort_keys=True, default=str))


def _name_free(doc: dict, wgsl: dict[str, str]) -> dict:
    """`doc` with library executables keyed by identity (see `plan_hash`) and WGSL files by hash."""
    library = (doc.get("meta") or {}).get("library") or {}
    identity: dict[str, str] = {}
    executables = {}
    for key, spec in doc["executables"].items():
        spec = {**spec, "wgsl_file": "wgsl:" + wgsl.get(spec["wgsl_file"], spec["wgsl_file"])}
        if key in library or key.startswith("lib_"):
            identity[key] = "lib:" + _sha(json.dumps(spec, sort_keys=True, default=str))
        executables[identity.get(key, key)] = spec

    def dispatch(args: dict) -> dict:
        args = dict(args)
        if "entry_point" in args:
            args["entry_point"] = identity.get(args["entry_point"], args["entry_point"])
        if "tune" in args:
            variants = []
            for variant in args["tune"]["variants"]:
                variant = dispatch(variant)
                if "variant" in variant:   # a variant's name is its first dispatch's executable
                    variant["variant"] = variant["entry_point"]
                if "then" in variant:
                    variant["then"] = [dispatch(step) for step in variant["then"]]
                variants.append(variant)
            args["tune"] = {**args["tune"], "variants": variants}
        return args

    out = dict(doc, executables=executables, init=[dispatch(n) for n in doc["init"]],
               main=[dispatch(n) for n in doc["main"]])
    if library:
        out["meta"] = {**doc["meta"], "library": sorted(identity.get(k, k) for k in library)}
    return out


def _install() -> None:
    from torch_webgpu.runtime import executables

    original_kernel = executables.ExecutableCache.kernel

    def kernel(self, code, *args, **kwargs):
        if isinstance(code, str):
            _seen[_current[0]]["wgsl"].add(_sha(code))
        return original_kernel(self, code, *args, **kwargs)

    executables.ExecutableCache.kernel = kernel

    from torch_webgpu.compiler.lowering import lowering
    compiled_plan = lowering.__globals__["CompiledPlan"]
    original_init = compiled_plan.__init__

    def init(self, plan, *args, **kwargs):
        _seen[_current[0]]["plans"].add(plan_hash(plan))
        return original_init(self, plan, *args, **kwargs)

    compiled_plan.__init__ = init


def pytest_configure(config):
    if os.environ.get("CODEGEN_RECORD"):
        _install()


def pytest_runtest_setup(item):
    _current[0] = item.nodeid


def pytest_runtest_teardown(item):
    # written as the run goes (every 20 tests), so a run cut short by a timeout still leaves its recording
    _written[0] += 1
    if _written[0] % 20 == 0:
        _write()


def pytest_unconfigure(config):
    _write()


_written = [0]


def _write() -> None:
    out = os.environ.get("CODEGEN_RECORD")
    if not out:
        return
    Path(out).mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    doc = {test: {k: sorted(v) for k, v in kinds.items()} for test, kinds in _seen.items()}
    tmp = Path(out) / f".{worker}.json.tmp"
    tmp.write_text(json.dumps(doc, indent=0, sort_keys=True))
    tmp.replace(Path(out) / f"{worker}.json")


def _load(directory: str) -> dict[str, dict[str, set[str]]]:
    merged: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"wgsl": set(), "plans": set()})
    for f in sorted(Path(directory).glob("*.json")):
        for test, kinds in json.loads(f.read_text()).items():
            for k, v in kinds.items():
                merged[test][k].update(v)
    return merged


def compare(before_dir: str, after_dir: str) -> int:
    """Print what differs: the distinct WGSL sources and plans of the whole run (the verdict; exit 1 if
    they differ), then per test (informative: in-process caches make the first test to ask for a kernel
    depend on how xdist scheduled the tests)."""
    before, after = _load(before_dir), _load(after_dir)
    all_before = {k: set().union(*(t[k] for t in before.values())) for k in ("wgsl", "plans")}
    all_after = {k: set().union(*(t[k] for t in after.values())) for k in ("wgsl", "plans")}
    for kind in ("wgsl", "plans"):
        print(f"{kind}: {len(all_before[kind])} distinct before, {len(all_after[kind])} after, "
              f"{len(all_before[kind] - all_after[kind])} only before, "
              f"{len(all_after[kind] - all_before[kind])} only after")
    for test in sorted(set(before) & set(after)):
        for kind in ("wgsl", "plans"):
            gone, new = before[test][kind] - after[test][kind], after[test][kind] - before[test][kind]
            if gone or new:
                print(f"  {test} {kind}: {len(gone)} only before, {len(new)} only after")
    missing = sorted(set(before) ^ set(after))
    if missing:
        print(f"{len(missing)} tests recorded on one side only (renamed or not run):")
        for t in missing[:50]:
            print("  ", t)
    return int(all_before != all_after)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "compare":
        sys.exit("usage: python -m tools.codegen_record compare BEFORE_DIR AFTER_DIR")
    sys.exit(compare(sys.argv[2], sys.argv[3]))
