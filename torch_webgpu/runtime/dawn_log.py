"""Dawn's log lines go to Python `logging` (logger "torch_webgpu.dawn") instead of the process's stderr.

Dawn writes its messages with fprintf(stderr, "<Severity>: <message>\\n") (dawn/common/Log.cpp) and
wgpudawn exposes no logging callback, so `dawn_messages_to_logging` points file descriptor 2 at a
temporary file while Dawn opens the adapter and device, then re-emits each Dawn line as a log record.
Lines that are not Dawn's (another thread's output) are written back to stderr unchanged.
TORCH_WEBGPU_DAWN_LOG=stderr turns the capture off (e.g. to see Dawn's output before a native crash).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator

from torch_webgpu.config import DAWN_LOG

logger = logging.getLogger("torch_webgpu.dawn")

_LEVELS = {"Debug": logging.DEBUG, "Info": logging.INFO, "Warning": logging.WARNING, "Error": logging.ERROR}
_LINE = re.compile(r"^(Debug|Info|Warning|Error): (.*)$")
# Notices Dawn prints on every start that need no action: logged at DEBUG so that, with logging left
# unconfigured, users do not see them (logging's last-resort handler prints WARNING and above).
_EXPECTED = (
    # Dawn caps limits we never request (dynamic-offset buffers; runtime/adapter.py COMPUTE_LIMITS).
    re.compile(r"maxDynamic\w+PerPipelineLayout artificially reduced"),
)


def emit(text: str) -> str:
    """Log the Dawn lines of `text`; returns the other lines (to be written back to stderr)."""
    others = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            others.append(line)
            continue
        severity, message = match.groups()
        level = _LEVELS[severity]
        if level <= logging.WARNING and any(p.search(message) for p in _EXPECTED):
            level = logging.DEBUG
        logger.log(level, "%s", message)
    return "".join(f"{line}\n" for line in others)


@contextlib.contextmanager
def dawn_messages_to_logging() -> Iterator[None]:
    """While the block runs, what native code writes to stderr is captured and re-logged (see above)."""
    if DAWN_LOG.read() == "stderr":
        yield
        return
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to redirect
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            rest = emit(capture.read().decode("utf-8", errors="replace"))
            if rest:
                os.write(2, rest.encode())
