from contextlib import nullcontext
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch._functorch.pyfunctorch import temporarily_clear_interpreter_stack
from torch_geometric.data import Data
from torch_geometric.nn.kge import KGEModel
from torch_geometric.typing import Adj

from torch_wge.nn.decoders import OneToNLoss
from torch_wge.nn.kge.pyg_test import OneToNTest
from torch_wge.nn.models.wge import WGE, EncodedGraph


class WGEKGE(OneToNTest, KGEModel):
    r"""WGE (:class:`~torch_wge.nn.WGE`) behind the interface of
    :class:`torch_geometric.nn.kge.KGEModel`, so that code written for PyG's
    KGE models (:meth:`forward` on triples, :meth:`loss`, :meth:`loader`,
    :meth:`test`, :meth:`random_sample`) trains and evaluates WGE.

    WGE encodes the whole graph before it scores. :meth:`forward` returns the
    score :math:`f(h, r, t) = \sum_k \alpha_k f_k(h, r, t)` of each triple
    (its tail only, not every entity); relation ids :math:`r + R` are the
    inverses. :meth:`loss` is :meth:`OneToNLoss.triples <torch_wge.nn.OneToNLoss.triples>`
    of :obj:`loss_fn`, the 1-N objective for the batch's queries
    :math:`(h, r, ?)` and :math:`(t, r^{-1}, ?)` against all entities (the
    negatives are all other entities, so :meth:`random_sample` is not used).
    Each call of :meth:`forward` or :meth:`loss` encodes the graph: no
    encoding is kept from one call to the next, so that scores always follow
    the parameters in use (after an optimizer step, a loaded state dict,
    ``param.data = ...``, in-place edits, or under
    :func:`torch.func.functional_call`); code that scores queries by many
    calls of :meth:`forward` (PyG's own
    :meth:`~torch_geometric.nn.kge.KGEModel.test`) encodes once per call.
    :meth:`test` encodes once and scores chunks of queries against all
    entities, as the evaluator does; for ranking, :meth:`query_score_fn`
    encodes once and scores queries against all entities
    (:meth:`torch_wge.evaluation.LinkPredictionEvaluator.evaluate` uses it).
    What is kept is the encoder's adjacencies built from :obj:`data`'s views
    (:meth:`WGE.graph_inputs <torch_wge.nn.WGE.graph_inputs>`), which depend
    on the graph only: they are built (and the views checked against the
    graph) again when :obj:`data` or one of its attributes is replaced, a
    tensor of it is edited in place, or the embeddings' device or dtype
    changes; a copy (:func:`copy.deepcopy`, :mod:`pickle`) starts without
    them. The :obj:`node_emb` and :obj:`rel_emb` of
    :class:`~torch_geometric.nn.kge.KGEModel` are WGE's embeddings.

    Args:
        num_nodes (int): The number of entities.
        num_relations (int): The number of relations :math:`R` (without inverses).
        hidden_channels (int): The number of quaternions of each embedding
            (WGE's :obj:`channels` is :obj:`4 * hidden_channels`).
        data (torch_geometric.data.Data): The knowledge graph with the graph
            views the model's :obj:`views` need.
        loss_fn (OneToNLoss, optional): The training objective of :meth:`loss`.
            (default: :obj:`OneToNLoss()`, the paper's 1-N binary cross-entropy)
        **kwargs (optional): Further arguments of :class:`~torch_wge.nn.WGE`
            (:obj:`num_layers`, :obj:`alpha0`, :obj:`dropout`, ...).

    Example:
        >>> import torch_geometric.transforms as T
        >>> from torch_wge.testing import random_kg
        >>> from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform
        >>> data = T.Compose([EntityFocusedTransform(), RelationFocusedTransform()])(random_kg(20, 3, 60))
        >>> model = WGEKGE(20, 3, hidden_channels=2, data=data, num_layers=1).eval()
        >>> model(torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([5, 6])).shape
        torch.Size([2])
    """

    def __init__(
        self,
        num_nodes: int,
        num_relations: int,
        hidden_channels: int,
        data: Data,
        loss_fn: Optional[OneToNLoss] = None,
        **kwargs,
    ):
        torch.nn.Module.__init__(self)
        self.num_nodes = num_nodes
        self.num_relations = num_relations
        self.hidden_channels = hidden_channels
        self.wge = WGE(num_nodes, num_relations, hidden_channels=hidden_channels, **kwargs)
        self.loss_fn = loss_fn if loss_fn is not None else OneToNLoss()
        self.data = data
        self.wge.graph_inputs(data)  # fails early when a view is missing
        self._graph: Optional[Tuple[Tuple[Any, ...], Dict[str, Adj]]] = None  # (its source, the adjacencies)

    def __getstate__(self) -> Dict[str, Any]:
        # a copy or a pickle starts without the adjacencies: they are rebuilt from its data
        state = self.__dict__.copy()
        state["_graph"] = None
        return state

    @property
    def node_emb(self) -> torch.nn.Embedding:
        return self.wge.entity_embedding

    @property
    def rel_emb(self) -> torch.nn.Embedding:
        return self.wge.relation_embedding

    def reset_parameters(self):
        self.wge.reset_parameters()

    def _graph_source(self, weight: Tensor) -> Optional[Tuple[Any, ...]]:
        """What the adjacencies of :obj:`data` are built from: the data object, every attribute of
        it (a tensor as the object and its version counter, which in-place edits advance), and the
        embeddings' device and dtype; :obj:`None` where a version cannot be read (an inference
        tensor), so that nothing is kept."""
        attributes: List[Tuple[Any, ...]] = []
        for store in self.data.stores:
            for name, value in store.items():
                if isinstance(value, Tensor):
                    try:
                        attributes.append((name, value, value._version))
                    except RuntimeError:  # an inference tensor has no version counter
                        return None
                else:
                    attributes.append((name, value))
        return (self.data, weight.device, weight.dtype, *attributes)

    def _graph_inputs(self) -> Dict[str, Adj]:
        r"""The adjacency arguments of :meth:`WGE.encode <torch_wge.nn.WGE.encode>` for
        :obj:`data`, on the embeddings' device and in their dtype: built by
        :meth:`WGE.graph_inputs <torch_wge.nn.WGE.graph_inputs>` (which checks the views against
        the graph) and kept while the data object, each of its attributes (the same objects, no
        tensor edited in place) and the embeddings' device and dtype stay the same."""
        weight = self.wge.entity_embedding.weight
        source = self._graph_source(weight)
        if self._graph is not None and source is not None and _same(self._graph[0], source):
            return self._graph[1]
        # the adjacencies are constants of the graph: built as plain tensors inside a torch.func transform too
        with temporarily_clear_interpreter_stack() if torch._C._are_functorch_transforms_active() else nullcontext():
            inputs = {k: v.to(weight.device) for k, v in self.wge.graph_inputs(self.data).items()}
        self._graph = None if source is None else (source, inputs)
        return inputs

    def _encode(self) -> EncodedGraph:
        """The graph encoded with the parameters in use, anew on every call."""
        return self.wge.encode(**self._graph_inputs())

    def forward(self, head_index: Tensor, rel_type: Tensor, tail_index: Tensor) -> Tensor:
        return self.wge.score_triples(self._encode(), head_index, rel_type, tail_index)

    def loss(self, head_index: Tensor, rel_type: Tensor, tail_index: Tensor) -> Tensor:
        return self.loss_fn.triples(self.wge, self._encode(), head_index, rel_type, tail_index)

    def query_score_fn(self) -> Callable[[Tensor, Tensor], Tensor]:
        r"""Encodes the graph once and returns ``score_fn(entities [B],
        relations [B]) -> [B, N]``, the scores of every entity as the answer
        of :math:`(e_b, r_b, ?)`, relation ids in :math:`[0, 2R)`."""
        encoded = self._encode()
        return lambda entities, relations: self.wge.score_all(encoded, entities, relations)


def _same(first: Any, second: Any) -> bool:
    """Whether two graph sources are the same: tensors, data and other objects compared by identity,
    numbers, strings, devices and dtypes by value, tuples item by item."""
    if isinstance(first, tuple) and isinstance(second, tuple):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    if isinstance(first, (bool, int, float, str, torch.device, torch.dtype)) and type(first) is type(second):
        return first == second
    return first is second
