from typing import Dict, Tuple

import torch_geometric.transforms as T
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset

from torch_wge.data import kg_triples, num_kg_relations
from torch_wge.datasets import DATASETS, get_dataset
from torch_wge.training.config import TrainConfig
from torch_wge.transforms import EntityFocusedTransform, LeviGraphTransform, RelationFocusedTransform

#: The splits as a run's files name them (``num_valid`` in checkpoints, ``"split": "valid"`` in
#: logs); :func:`torch_wge.data.kg_triples` reads ``"valid"`` as PyG's ``"val"``.
RUN_SPLITS = ("train", "valid", "test")


def graph_transform(config: TrainConfig) -> T.Compose:
    """The graph views a run of ``config`` needs, as one transform."""
    transforms = [
        EntityFocusedTransform(),
        RelationFocusedTransform(
            beta=config.beta,
            predicate_entities=config.predicate_entities,
            relation_edges=config.relation_edges,
        ),
    ]
    if config.views == "levi":
        transforms.append(LeviGraphTransform())
    return T.Compose(transforms)


def open_dataset(name: str, root: str, **kwargs) -> InMemoryDataset:
    """The dataset called ``name`` under ``root``, or the folder of triple files ``name``
    (processed under ``root``: the folder itself is only read)."""
    if name.lower() in DATASETS:
        return get_dataset(name, root, **kwargs)
    return get_dataset(name, cache_root=root, **kwargs)


def load_data(config: TrainConfig, force_reload: bool = False, log: bool = True) -> Tuple[InMemoryDataset, Data]:
    """Loads (or downloads) ``config.dataset`` under ``config.root`` with its graph views.
    A ``config.dataset`` that is no dataset name but a folder is read as a
    :class:`~torch_wge.datasets.TriplesFolder`.

    The views are the dataset's ``pre_transform``: built once and stored with
    the processed graph, in a folder of its own for every setting of the
    transforms (``beta``, ...), so a changed setting never reuses another's
    graph. ``force_reload`` processes the raw files anew; ``log`` prints
    the dataset's download and processing messages.
    """
    dataset = open_dataset(
        config.dataset,
        config.root,
        pre_transform=graph_transform(config),
        force_reload=force_reload,
        log=log,
        unseen=config.unseen,
    )
    return dataset, dataset[0]


def split_triples(data: Data, split: str) -> Tensor:
    """Triples ``[T, 3]`` as ``(head, relation, tail)`` of ``split`` (train, valid, test or all),
    from any layout of :mod:`torch_wge.data.knowledge_graph`: :func:`~torch_wge.data.kg_triples`."""
    return kg_triples(data, split)


def graph_sizes(data: Data) -> Dict[str, int]:
    """Sizes that identify a graph; stored in checkpoints to catch mismatches."""
    return {
        "num_entities": int(data.num_nodes),
        "num_relations": num_kg_relations(data),
        **{f"num_{split}": int(kg_triples(data, split).size(0)) for split in RUN_SPLITS},
    }
