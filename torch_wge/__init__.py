"""torch_wge: WGE two-view quaternion graph neural networks for knowledge graph completion."""

__version__ = "0.1.0"
