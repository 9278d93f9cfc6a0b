"""The command line of the probe modules that print one JSON row per figure (`--reps`, `--json`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable


def rows_main(run: Callable[..., list[dict]], description: str, reps: int, **options: int) -> None:
    """Parse `--reps` (default `reps`), one `--<name>` integer per keyword of `options` (its default) and
    `--json`, call `run(reps, **options)` (which prints its rows) and write the rows to the --json file if
    one is named."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--reps", type=int, default=reps)
    for name, default in options.items():
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = run(args.reps, **{name: getattr(args, name) for name in options})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
