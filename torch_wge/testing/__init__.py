"""Helpers for the test-suite and benchmarks: small random knowledge graphs, as graphs and as folders of triples."""

from torch_wge.testing.random_kg import kg_from_triples, random_kg
from torch_wge.testing.triples_folder import write_triples_folder

__all__ = ["kg_from_triples", "random_kg", "write_triples_folder"]
