"""The one shape of a kernel family, what its users need of it: the variants that can run a problem on a
device (the default first), the dispatches of one variant (`LaunchPlan`: launches and the scratch they
share) and the problem's autotuning key.

The eager device's choose-and-record loop (ops/library_launch.run_family) and a compiled plan's
load-time candidates (`candidates`) are written once against it, whatever the family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from . import autotune
from .launch import DeviceCaps, LaunchPlan

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)


@runtime_checkable
class KernelFamily(Protocol[P_contra]):
    """What a family of library kernels offers for its problem type."""

    kernel: str   # the autotuner's name of the family ("matmul", "rows", ...)

    def variants(self, problem: P_contra, caps: DeviceCaps) -> list[str]:
        """The variant names that can run `problem` on `caps`, best default first ([] when none can)."""
        ...

    def steps(self, problem: P_contra, caps: DeviceCaps, variant: str | None = None) -> LaunchPlan:
        """The dispatches of `variant` (default: the first of `variants`) and their scratch."""
        ...

    def problem_key(self, problem: P_contra) -> str:
        """The device-independent autotuning key of `problem` (a compiled plan carries it)."""
        ...


@dataclass(frozen=True)
class Family(Generic[P]):
    """A KernelFamily made of a family module's functions."""

    kernel: str
    variants_of: Callable[[P, DeviceCaps], list[str]]
    steps_of: Callable[[P, DeviceCaps, str | None], LaunchPlan]

    def variants(self, problem: P, caps: DeviceCaps) -> list[str]:
        """The variant names that can run `problem` on `caps`, best default first."""
        return self.variants_of(problem, caps)

    def steps(self, problem: P, caps: DeviceCaps, variant: str | None = None) -> LaunchPlan:
        """The dispatches of `variant` (default: the first of `variants`) and their scratch."""
        return self.steps_of(problem, caps, variant)

    def problem_key(self, problem: P) -> str:
        """The autotuner's key of `problem`, without the device."""
        return autotune.problem_key(self.kernel, problem)


def single(plan: Callable[[Any, DeviceCaps, str | None], Any]) -> Callable[[Any, DeviceCaps, str | None],
                                                                           LaunchPlan]:
    """`steps_of` for a family whose planner returns one KernelLaunch."""
    def steps(problem: Any, caps: DeviceCaps, variant: str | None = None) -> LaunchPlan:
        return LaunchPlan((plan(problem, caps, variant),))
    return steps


def candidates(family: KernelFamily, problem: Any, caps: DeviceCaps) -> list[tuple[str, LaunchPlan]]:
    """The variants a compiled plan carries for load-time tuning, with their plans: the first
    `autotune.MAX_CANDIDATES` of `family.variants` (the default first)."""
    return [(name, family.steps(problem, caps, name))
            for name in family.variants(problem, caps)[:autotune.MAX_CANDIDATES]]
