"""combine_splits joins three split graphs that share ids into one graph with masks."""

import torch
from torch_geometric.data import Data, InMemoryDataset

from torch_wge.data import combine_splits


def split(triples, num_nodes=5):
    ids = torch.tensor(triples)
    return Data(edge_index=ids[:, [0, 2]].t().contiguous(), edge_type=ids[:, 1].contiguous(), num_nodes=num_nodes)


class OneGraph(InMemoryDataset):
    def __init__(self, data):
        super().__init__()
        self.data, self.slices = data, None


def test_hand_computed():
    train, val, test = split([(0, 0, 1), (1, 1, 2), (2, 0, 3)]), split([(3, 2, 4)]), split([(4, 1, 0), (1, 0, 3)])
    data = combine_splits(train, val, test)
    # the edges of train, then val, then test, each in its own order
    assert data.edge_index.tolist() == [[0, 1, 2, 3, 4, 1], [1, 2, 3, 4, 0, 3]]
    assert data.edge_type.tolist() == [0, 1, 0, 2, 1, 0]
    assert data.train_mask.tolist() == [True, True, True, False, False, False]
    assert data.val_mask.tolist() == [False, False, False, True, False, False]
    assert data.test_mask.tolist() == [False, False, False, False, True, True]
    assert (data.num_nodes, data.num_relations) == (5, 3)  # relations: the largest id 2, plus one
    assert data.edge_index.dtype == data.edge_type.dtype == torch.long


def test_num_nodes_is_the_largest_of_the_splits_and_datasets_are_read_as_their_graph():
    train, val, test = split([(0, 0, 1)], num_nodes=2), split([(1, 0, 0)], num_nodes=2), split([(5, 3, 0)], num_nodes=6)
    data = combine_splits(OneGraph(train), val, test)
    assert (data.num_nodes, data.num_relations) == (6, 4)
    assert data.edge_index.tolist() == [[0, 1, 5], [1, 0, 0]]
