"""Benchmarks of skl_nw; run ``python -m benchmarks NAME`` (not part of the package)."""
