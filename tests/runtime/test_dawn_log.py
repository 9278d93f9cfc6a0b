"""Dawn's messages reach Python logging ("torch_webgpu.dawn"), not the terminal (issue 11, also)."""

import logging
import os
import subprocess
import sys

from torch_webgpu.runtime import dawn_log

_OPEN_WITH_LOGGING = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.DEBUG, stream=sys.stdout,\n"
    "                    format='%(name)s|%(levelname)s|%(message)s')\n"
    "import torch_webgpu.runtime as r\n"
    "print('backend_type|' + r.get_runtime().info.backend_type)\n"
)


def _open_runtime(**env):
    return subprocess.run([sys.executable, "-c", _OPEN_WITH_LOGGING], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_start_up_notices_are_log_records_not_stderr():
    proc = _open_runtime()
    assert proc.returncode == 0, proc.stderr
    assert "Warning:" not in proc.stderr and "artificially reduced" not in proc.stderr
    lines = proc.stdout.splitlines()
    records = [line.split("|", 2) for line in lines if line.startswith("torch_webgpu.dawn|")]
    backend_type = next(line for line in lines if line.startswith("backend_type|"))
    if "vulkan" in backend_type.lower():   # Dawn's Vulkan backend caps dynamic buffers at every start
        assert any(lvl == "DEBUG" and "artificially reduced" in msg for _, lvl, msg in records), proc.stdout


def test_capture_can_be_turned_off():
    proc = _open_runtime(TORCH_WEBGPU_DAWN_LOG="stderr")
    assert proc.returncode == 0, proc.stderr
    assert not any(line.startswith("torch_webgpu.dawn|") for line in proc.stdout.splitlines())


def test_native_stderr_lines_are_logged_by_severity(caplog, capfd):
    with caplog.at_level(logging.DEBUG, logger="torch_webgpu.dawn"), dawn_log.dawn_messages_to_logging():
        os.write(2, b"Warning: a limit was clamped\nError: the adapter said no\nnot from dawn\n")
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "torch_webgpu.dawn"]
    assert records == [(logging.WARNING, "a limit was clamped"), (logging.ERROR, "the adapter said no")]
    err = capfd.readouterr().err
    assert "not from dawn" in err and "clamped" not in err   # other output is given back to stderr


def test_expected_notices_are_demoted_to_debug(caplog):
    with caplog.at_level(logging.DEBUG, logger="torch_webgpu.dawn"):
        rest = dawn_log.emit("Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from "
                             "1000000 to 16 to fit dynamic offset allocation limit.\n")
    assert rest == ""
    assert [r.levelno for r in caplog.records if r.name == "torch_webgpu.dawn"] == [logging.DEBUG]
