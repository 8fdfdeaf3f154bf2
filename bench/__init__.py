"""Benchmarks and retrieval-quality evaluations (run as `python -m bench.<name>`)."""
