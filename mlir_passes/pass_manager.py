"""A small pass manager over MLIR Python bindings: named passes (textual pipelines or Python functions)
run in order on one module, each timed and optionally dumped."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pass:
    """A pass: either a textual MLIR pipeline (`pipeline`) or a Python function (`run(module)`)."""

    name: str
    pipeline: str | None = None
    run: Callable[[Any], None] | None = None


@dataclass
class PassManager:
    """Runs passes in order; `timings` holds seconds per pass; `dump(name, text)` sees the IR after each."""

    passes: list[Pass]
    dump: Callable[[str, str], None] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, module: Any, pass_manager_cls: Any) -> Any:
        """Run every pass on `module`; `pass_manager_cls`: torch_mlir's or iree's PassManager."""
        for p in self.passes:
            start = time.perf_counter()
            if p.pipeline is not None:
                pm = pass_manager_cls.parse(p.pipeline, context=module.context)
                pm.run(module.operation)
            if p.run is not None:
                p.run(module)
            self.timings[p.name] = time.perf_counter() - start
            if self.dump is not None:
                self.dump(p.name, str(module))
        return module
