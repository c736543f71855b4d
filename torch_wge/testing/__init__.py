"""Helpers for the test-suite and benchmarks: small random knowledge graphs."""

from torch_wge.testing.random_kg import kg_from_triples, random_kg

__all__ = ["kg_from_triples", "random_kg"]
