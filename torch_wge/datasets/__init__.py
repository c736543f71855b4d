r"""Knowledge graph benchmarks as single-graph PyG datasets.

Each dataset holds one :class:`~torch_geometric.data.Data` with
``edge_index`` (head, tail), ``edge_type``, ``train_mask``/``val_mask``/
``test_mask``, ``num_nodes`` and ``num_relations``; see
:class:`~torch_wge.datasets.base.KnowledgeGraphDataset`.
"""

from torch_wge.datasets.base import DownloadError, KnowledgeGraphDataset
from torch_wge.datasets.codex import CoDEx
from torch_wge.datasets.folder import TriplesFolder
from torch_wge.datasets.freebase import FB15k237
from torch_wge.datasets.litwd import LitWD
from torch_wge.datasets.registry import DATASETS, get_dataset
from torch_wge.datasets.statistics import dataset_statistics

__all__ = [
    "KnowledgeGraphDataset",
    "CoDEx",
    "LitWD",
    "FB15k237",
    "TriplesFolder",
    "DATASETS",
    "get_dataset",
    "dataset_statistics",
    "DownloadError",
]
