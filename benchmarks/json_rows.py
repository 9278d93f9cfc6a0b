"""The command line of the probe modules that print one JSON row per figure (`--reps`, `--json`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable


def rows_main(run: Callable[[int], list[dict]], description: str, reps: int) -> None:
    """Parse `--reps` (default `reps`) and `--json`, call `run(reps)` (which prints its rows) and write
    the rows to the --json file if one is named."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = run(args.reps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
