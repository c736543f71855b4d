"""Helpers for the test-suite: tiny random knowledge graphs."""
from torch_wge.testing.random_kg import random_kg

__all__ = ["random_kg"]
