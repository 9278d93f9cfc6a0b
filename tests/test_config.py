"""torch_webgpu/config.py: the table of environment variables, its parsers and defaults, its errors, and
that it is the only reader of the environment and matches README's table."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from torch_webgpu import config
from torch_webgpu.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def unset(monkeypatch):
    """Every variable of the table unset for the test."""
    for variable in config.VARIABLES:
        monkeypatch.delenv(variable.name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(("name", "value"), [
    ("BACKEND", "dawn"), ("ADAPTER", ""), ("EXECUTOR", "native"), ("NODE_MODULES", None),
    ("PLAN_MEMORY", True), ("EAGER_LAUNCH", "native"), ("FLUSH_MS", 0.5), ("SYNC_SPIN_US", 20000.0),
    ("PLAN_SPLIT", 32), ("SUBMIT", "native"), ("PIN_CLOCK", "auto"), ("FALLBACK", True),
    ("MEMORY_LIMIT", None), ("CACHE_DIR", None), ("DUMP_DIR", None), ("COMPILE_TIMING", False),
    ("LIBRARY", True), ("GROUPED_GEMV", True), ("SUBGROUP_SIZE", None), ("DAWN_TOGGLES", "1"),
    ("AUTOTUNE", "auto"), ("AUTOTUNE_DIR", None), ("AUTOTUNE_MIN_FLOPS", None), ("DAWN_LOG", "logging"),
])
def test_defaults_when_unset(unset, name, value):
    variable = getattr(config, name)
    assert variable.read() == value


@pytest.mark.parametrize(("name", "gpu", "software"), [
    ("FLUSH_MS", 0.5, None), ("SYNC_SPIN_US", 20000.0, 0.0), ("PLAN_SPLIT", 32, 0),
])
def test_software_adapters_have_their_own_defaults_but_a_set_value_wins(unset, name, gpu, software):
    variable = getattr(config, name)
    assert variable.read() == gpu
    assert variable.read(software=True) == software
    unset.setenv(variable.name, "7")
    assert variable.read() == variable.read(software=True) == 7


@pytest.mark.parametrize(("name", "text", "value"), [
    ("BACKEND", " WGPU ", "wgpu"), ("BACKEND", "wgpudawn", "dawn"), ("BACKEND", "", "dawn"),
    ("ADAPTER", " NVIDIA H100 ", "NVIDIA H100"), ("EXECUTOR", "Check", "check"), ("EXECUTOR", "", "native"),
    ("EAGER_LAUNCH", "python", "python"), ("SUBMIT", "python", "python"), ("PIN_CLOCK", "1", "on"),
    ("PIN_CLOCK", "off", "off"), ("PIN_CLOCK", "", "auto"), ("FLUSH_MS", "2", 2.0), ("FLUSH_MS", "OFF", None),
    ("FLUSH_MS", "0", None), ("FLUSH_MS", "", None), ("SYNC_SPIN_US", "250", 250.0),
    ("SYNC_SPIN_US", "", 0.0), ("PLAN_SPLIT", "8", 8), ("PLAN_SPLIT", "off", 0), ("PLAN_SPLIT", "1e2", 100),
    ("FALLBACK", "0", False), ("FALLBACK", "1", True), ("FALLBACK", "", True),
    ("MEMORY_LIMIT", "512M", 512 << 20), ("MEMORY_LIMIT", "4GiB", 4 << 30), ("MEMORY_LIMIT", "1.5k", 1536),
    ("MEMORY_LIMIT", "1000", 1000), ("MEMORY_LIMIT", "", None), ("CACHE_DIR", "/tmp/x", Path("/tmp/x")),
    ("CACHE_DIR", "", None), ("NODE_MODULES", "nm", Path("nm")),
    ("DUMP_DIR", "", None), ("COMPILE_TIMING", "1", True), ("COMPILE_TIMING", "yes", True),
    ("COMPILE_TIMING", "", False), ("LIBRARY", "0", False), ("LIBRARY", "off", False), ("LIBRARY", "", True),
    ("GROUPED_GEMV", "False", False), ("PLAN_MEMORY", "0", False), ("SUBGROUP_SIZE", "0", 0),
    ("SUBGROUP_SIZE", " 8 ", 8), ("SUBGROUP_SIZE", "", None), ("DAWN_TOGGLES", "off", "0"),
    ("DAWN_TOGGLES", "", "1"), ("DAWN_TOGGLES", "FAST", "fast"), ("AUTOTUNE", "0", "off"),
    ("AUTOTUNE", "no", "off"), ("AUTOTUNE", "1", "on"), ("AUTOTUNE", "", "auto"),
    ("AUTOTUNE_MIN_FLOPS", "0", 0), ("AUTOTUNE_MIN_FLOPS", "1e6", 10**6), ("DAWN_LOG", "STDERR", "stderr"),
    ("DAWN_LOG", "", "logging"),
])
def test_parsing(unset, name, text, value):
    variable = getattr(config, name)
    unset.setenv(variable.name, text)
    assert variable.read() == value


@pytest.mark.parametrize(("name", "text"), [
    ("BACKEND", "metal3"), ("EXECUTOR", "fast"), ("EAGER_LAUNCH", "cuda"), ("SUBMIT", "fast"),
    ("PIN_CLOCK", "sometimes"), ("PLAN_MEMORY", "2"), ("FLUSH_MS", "-1"), ("FLUSH_MS", "nan"),
    ("FLUSH_MS", "soon"), ("SYNC_SPIN_US", "inf"), ("PLAN_SPLIT", "2.5"), ("PLAN_SPLIT", "-1"),
    ("FALLBACK", "off"), ("FALLBACK", " 0"), ("MEMORY_LIMIT", "lots"), ("MEMORY_LIMIT", "-4G"),
    ("COMPILE_TIMING", "verbose"), ("LIBRARY", "iree"), ("GROUPED_GEMV", "2"), ("SUBGROUP_SIZE", "wide"),
    ("SUBGROUP_SIZE", "-8"), ("DAWN_TOGGLES", "maybe"), ("AUTOTUNE", "always"), ("AUTOTUNE_MIN_FLOPS", "big"),
    ("AUTOTUNE_MIN_FLOPS", "inf"), ("DAWN_LOG", "file"),
])
def test_a_bad_value_raises_naming_the_variable_and_what_it_accepts(unset, name, text):
    variable = getattr(config, name)
    unset.setenv(variable.name, text)
    with pytest.raises(ConfigError) as raised:
        variable.read()
    assert str(raised.value) == f"{variable.name}={text!r}: expected {variable.accepted}"
    assert isinstance(raised.value, ValueError)


def test_every_variable_parses_its_own_defaults(unset):
    for variable in config.VARIABLES:
        variable.read()
        variable.read(software=True)


def test_names_are_unique_and_every_variable_is_in_the_table():
    names = [v.name for v in config.VARIABLES]
    assert len(set(names)) == len(names)
    declared = {v.name for v in vars(config).values() if isinstance(v, config.Variable)}
    assert declared == set(names)


def test_overridden_sets_then_restores(unset):
    with config.overridden(config.DUMP_DIR, "/tmp/dump"):
        assert config.DUMP_DIR.read() == Path("/tmp/dump")
        with config.overridden(config.DUMP_DIR, None):
            assert config.DUMP_DIR.read() is None
        assert config.DUMP_DIR.read() == Path("/tmp/dump")
    assert config.DUMP_DIR.name not in os.environ


def _readme_variables() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", section, flags=re.M)


def test_readme_table_lists_the_config_table_in_its_order():
    readme = _readme_variables()
    names = [v.name for v in config.VARIABLES]
    assert sorted(set(readme) - set(names)) == [], "in README's table but not in torch_webgpu/config.py"
    assert sorted(set(names) - set(readme)) == [], "in torch_webgpu/config.py but not in README's table"
    assert readme == names, "README's table and config.VARIABLES list the variables in different orders"


_ENV_ATTRIBUTES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _environment_uses(source: str) -> list[int]:
    """The lines where Python `source` touches the process environment (os.environ, os.getenv, ...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in _ENV_ATTRIBUTES:
            found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                a.name in _ENV_ATTRIBUTES for a in node.names):
            found.append(node.lineno)
    return sorted(found)


def test_only_config_reads_the_environment():
    """Every environment variable is read through torch_webgpu/config.py (so the table is complete)."""
    package = ROOT / "torch_webgpu"
    offenders = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(package.rglob("*.py"))
                 if path != package / "config.py" for line in _environment_uses(path.read_text())]
    assert offenders == [], f"read the environment through torch_webgpu.config instead: {offenders}"


def test_the_environment_check_sees_each_way_in():
    source = ("import os\nfrom os import getenv\nA = os.environ.get('TORCH_WEBGPU_X')\n"
              "B = os.getenv('TORCH_WEBGPU_Y')\nC = 'TORCH_WEBGPU_Z'\n")
    assert _environment_uses(source) == [2, 3, 4]


def test_callers_read_through_the_table(unset):
    """The modules' own accessors give the table's values (a spot check over the layers)."""
    from torch_webgpu.compiler.families.grouped import grouping_enabled
    from torch_webgpu.compiler.library_plan import library_enabled
    from torch_webgpu.kernels import autotune
    from torch_webgpu.plan import memory, phases
    from torch_webgpu.runtime import native_queue

    unset.setenv("TORCH_WEBGPU_LIBRARY", "off")
    unset.setenv("TORCH_WEBGPU_GROUPED_GEMV", "0")
    unset.setenv("TORCH_WEBGPU_PLAN_MEMORY", "0")
    unset.setenv("TORCH_WEBGPU_COMPILE_TIMING", "1")
    unset.setenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", "5")
    unset.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", "/tmp/tune")
    assert (library_enabled(), grouping_enabled(), memory.enabled(), phases.log_enabled()) == (
        False, False, False, True)
    assert autotune.min_flops() == 5 and autotune.cache_file() == Path("/tmp/tune/autotune.json")
    unset.delenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS")
    assert autotune.min_flops(123) == 123
    unset.setenv("TORCH_WEBGPU_PLAN_SPLIT", "2.5")
    with pytest.raises(ValueError, match="TORCH_WEBGPU_PLAN_SPLIT"):
        native_queue.plan_split_dispatches()


def test_autotune_policy_on_hardware_and_software_adapters(unset):
    from torch_webgpu.kernels import autotune
    from torch_webgpu.kernels.launch import DeviceCaps

    gpu, cpu = DeviceCaps(), DeviceCaps(cpu=True)
    assert (autotune.tunes_on(gpu), autotune.tunes_on(cpu), autotune.enabled()) == (True, False, True)
    unset.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    assert (autotune.tunes_on(gpu), autotune.tunes_on(cpu)) == (True, True)
    unset.setenv("TORCH_WEBGPU_AUTOTUNE", "0")
    assert (autotune.tunes_on(gpu), autotune.tunes_on(cpu), autotune.enabled()) == (False, False, False)
