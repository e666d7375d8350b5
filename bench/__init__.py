"""Benchmarks run by `make bench`; they print tables and write JSON under bench-results/."""
