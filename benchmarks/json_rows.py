"""The command line every probe mode shares (`python -m benchmarks latency|library|anatomy MODE ...`).

A probe suite is a package of this folder (latency/, library/, anatomy/); each of its modules not named
with a leading underscore is one mode, named as the module with hyphens (`sync_cost` -> `sync-cost`). A
mode's `run(...)` returns its rows (dicts, printed as JSON lines as they are made, `emit`) and its
`main(argv, prog)` is `rows_main(run, ...)` with the mode's own options: `--json FILE` writes what `run`
returned, and `--cuda-context` opens a CUDA context before the mode runs (benchmarks.backends.start_cuda:
how every figure before issue 42 was taken; without it no mode touches CUDA before its WebGPU figures,
and torch CUDA's figures, where a mode has them, come after all of those).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Option:
    """A mode's option: its default, help, and how its text is read (default: as the default's type)."""

    default: Any = None
    help: str = ""
    type: Callable[[str], Any] | None = None
    choices: Sequence[str] | None = None
    positional: bool = False
    nargs: str | None = None


def comma_list(convert: Callable[[str], Any] = str) -> Callable[[str], list]:
    """A reader of comma-separated values, each through `convert`."""
    def read(text: str) -> list:
        return [convert(part) for part in text.split(",") if part]
    return read


def emit(row: dict) -> dict:
    """Print one row as a JSON line at once (a long mode shows its rows as they come) and return it."""
    print(json.dumps(row), flush=True)
    return row


def _add(ap: argparse.ArgumentParser, name: str, option: Any) -> None:
    option = option if isinstance(option, Option) else Option(option)
    if isinstance(option.default, bool) and not option.positional:
        ap.add_argument(f"--{name.replace('_', '-')}", dest=name, action="store_true",
                        default=option.default, help=option.help)
        return
    kind = option.type or (type(option.default) if option.default is not None else str)
    kwargs: dict[str, Any] = {"type": kind, "help": option.help or None}
    if option.choices is not None:
        kwargs["choices"] = option.choices
    if option.nargs is not None:
        kwargs["nargs"] = option.nargs
    if option.positional:
        ap.add_argument(name, **kwargs)
    else:
        ap.add_argument(f"--{name.replace('_', '-')}", dest=name, default=option.default, **kwargs)


def rows_main(run: Callable[..., Any], description: str, argv: Sequence[str] | None = None,
              prog: str | None = None, summary: Callable[[Any], list[str]] | None = None,
              cuda_context: bool = True, **options: Any) -> Any:
    """Parse the mode's `options` (name -> default or Option; `reps=50` gives `--reps`, `heavy_bytes` gives
    `--heavy-bytes`), `--json FILE` and (with `cuda_context`) `--cuda-context`; call `run(**options)`,
    print `summary(rows)`'s lines if given, write the rows to the --json file if one is named, and return
    them."""
    ap = argparse.ArgumentParser(prog=prog, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, option in options.items():
        _add(ap, name, option)
    ap.add_argument("--json", type=Path, help="write the rows to this file (JSON)")
    if cuda_context:
        ap.add_argument("--cuda-context", action="store_true",
                        help="open a CUDA context first, as every figure before issue 42 was taken")
    args = ap.parse_args(argv)
    kwargs = {name: getattr(args, name) for name in options}
    if cuda_context and "cuda_context" in inspect.signature(run).parameters:
        kwargs["cuda_context"] = args.cuda_context   # a mode of several processes passes it on
    elif cuda_context and args.cuda_context:
        from .backends import start_cuda

        start_cuda()
    rows = run(**kwargs)
    if summary is not None:
        for line in summary(rows):
            print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def modes(package: ModuleType) -> dict[str, tuple[str, str]]:
    """Mode name -> (module name, the first line of its docstring) of a probe suite's package, read
    without importing the modules (their imports, torch's among them, cost seconds)."""
    out = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        path = Path(package.__path__[0]) / f"{info.name}.py"
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        out[info.name.replace("_", "-")] = (info.name, headline(doc))
    return out


def headline(doc: str, width: int = 90) -> str:
    """A docstring's first sentence (of its first paragraph), cut to `width` characters at a word."""
    text = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = text.split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= width else sentence[:width].rsplit(" ", 1)[0] + " …"
