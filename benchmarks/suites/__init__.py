"""Benchmark suites; each module exposes `run(settings, backends) -> list[Measurement]`."""
