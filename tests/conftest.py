"""How pytest-xdist splits the suite over workers (pyproject's addopts run `-n auto --dist loadgroup`).

Tests are handed out one at a time, except where expensive fixtures are shared: the files of a directory
whose session fixtures serve all of them (a browser, exported bundles, a private compile cache) stay on
one worker, and so do the tests of a module that defines its own module- or session-scoped fixtures
(compiled models, built programs), so that no worker builds them twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_SHARED_DIRECTORIES = {"bundle", "cli", "web"}
_SHARED_SCOPES = {"module", "session"}


def _module_shares_fixtures(item: pytest.Item) -> bool:
    """True when a module- or session-scoped fixture the item uses is defined in its own module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    module_id = item.nodeid.split("::", 1)[0]
    return any(d.scope in _SHARED_SCOPES and d.baseid == module_id
               for defs in info.name2fixturedefs.values() for d in defs)


def _group(item: pytest.Item, tests_root: Path) -> str | None:
    """The xdist group keeping `item` with the tests sharing its fixtures, or None to hand it out alone."""
    try:
        parts = item.path.relative_to(tests_root).parts
    except ValueError:
        return None
    if len(parts) > 1 and parts[0] in _SHARED_DIRECTORIES:
        return parts[0]
    if _module_shares_fixtures(item):
        return "/".join(parts)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark items with their xdist group (see the module docstring)."""
    tests_root = Path(__file__).parent
    for item in items:
        group = _group(item, tests_root)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
