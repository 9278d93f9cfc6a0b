"""The harness's suites (`python -m benchmarks run --suite NAME`); each module exposes
`run(settings, backends) -> list[Measurement]`."""
