"""Entry point for `python -m benchmarks`."""

from .cli import main

main()
