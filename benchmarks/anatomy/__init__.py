"""What one thing is made of (`python -m benchmarks anatomy MODE`).

A library kernel's time by part, a plan's device memory by kind, an eager forward's dispatches and round
trips.
"""
