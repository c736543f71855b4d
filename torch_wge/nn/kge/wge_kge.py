from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.kge import KGEModel
from torch_geometric.typing import Adj

from torch_wge.nn.decoders import OneToNLoss
from torch_wge.nn.kge.pyg_test import OneToNTest
from torch_wge.nn.models.wge import WGE, EncodedGraph
from torch_wge.utils.sparse import in_function_transform


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
    entities, as the evaluator does, and ranks ties differently from PyG's
    (see :meth:`test`); for ranking, :meth:`query_score_fn` encodes once and
    scores queries against all entities
    (:meth:`torch_wge.evaluation.LinkPredictionEvaluator.evaluate` uses it).

    **Embeddings.** :class:`~torch_geometric.nn.kge.KGEModel`'s constructor
    runs as for PyG's models (with :obj:`4 * hidden_channels` real numbers
    per embedding), and the weights of its :obj:`node_emb` and :obj:`rel_emb`
    are WGE's: ``node_emb.weight`` is ``wge.entity_embedding.weight`` and
    ``rel_emb.weight`` is ``wge.relation_embedding.weight``, one
    :class:`~torch.nn.Parameter` under both names (tied, as PyTorch ties
    weights), so that :meth:`parameters` yields each weight once (named
    :obj:`node_emb.weight` and :obj:`rel_emb.weight`),
    :func:`torch.func.functional_call` takes either name, and :obj:`wge`
    stays a whole :class:`~torch_wge.nn.WGE` (``model.wge.load_state_dict``
    takes the trainer's checkpoints). :obj:`rel_emb` has :math:`2R` rows,
    relation :math:`r` and its inverse :math:`r + R`. :meth:`state_dict` holds
    each weight once, under :obj:`node_emb.weight` / :obj:`rel_emb.weight`;
    :meth:`load_state_dict` takes those names or WGE's
    (:obj:`wge.entity_embedding.weight`, as state dicts saved before the
    weights were tied hold them; given both, KGEModel's name is loaded) and
    keeps the weights tied (also with ``assign=True``). The parameters are
    initialised as those of ``WGE(num_nodes, num_relations, ...)`` built
    under the same seed.

    **The graph.** Unlike PyG's KGE models, which hold embeddings only,
    :class:`WGEKGE` keeps the graph it encodes, :obj:`data` (a plain
    attribute, replaceable, never in :meth:`state_dict`): its scores are a
    function of the whole graph (every entity's representation is computed
    from its neighbourhood in both views on each call), while PyG's
    :meth:`forward`, :meth:`loss` and :meth:`test` take triples only, with no
    graph argument. So a state dict goes with a model built on its graph;
    :meth:`to` moves the parameters, not :obj:`data` (the adjacencies built
    from it are moved to the embeddings' device); a copy
    (:func:`copy.deepcopy`, :mod:`pickle`) holds its own copy of :obj:`data`.
    What is kept besides is the encoder's adjacencies built from :obj:`data`'s
    views (:meth:`WGE.graph_inputs <torch_wge.nn.WGE.graph_inputs>`), which
    depend on the graph only: they are built (and the views checked against
    the graph) again when :obj:`data` or one of its attributes is replaced, a
    tensor of it is edited in place, or the embeddings' device or dtype
    changes; a copy starts without them.

    Args:
        num_nodes (int): The number of entities.
        num_relations (int): The number of relations :math:`R` (without inverses).
        hidden_channels (int): The number of quaternions of each embedding
            (WGE's :obj:`channels` is :obj:`4 * hidden_channels`).
        data (torch_geometric.data.Data): The knowledge graph with the graph
            views the model's :obj:`views` need.
        loss_fn (OneToNLoss, optional): The training objective of :meth:`loss`.
            (default: :obj:`OneToNLoss()`, the paper's 1-N binary cross-entropy)
        sparse (bool, optional): :obj:`False` only, the argument of
            :class:`~torch_geometric.nn.kge.KGEModel`: the encoder and the
            decoders read whole embedding matrices, so their gradients are
            dense and :obj:`True` is refused. (default: :obj:`False`)
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
        >>> model.node_emb.weight is model.wge.entity_embedding.weight, model.rel_emb.weight.shape  # 2R rows
        (True, torch.Size([6, 8]))
    """

    def __init__(
        self,
        num_nodes: int,
        num_relations: int,
        hidden_channels: int,
        data: Data,
        loss_fn: Optional[OneToNLoss] = None,
        sparse: bool = False,
        **kwargs,
    ):
        if sparse:
            raise ValueError(
                f"'{self.__class__.__name__}' takes sparse=False only: WGE's encoder and decoders read the whole "
                f"embedding matrices, so their gradients are dense"
            )
        if kwargs.get("cached"):
            raise ValueError(
                f"'{self.__class__.__name__}' takes cached=False only: it encodes the graph its data holds now, "
                f"which may change between calls, and cached layers would keep the first one's"
            )
        # WGE first: it checks the arguments, and its parameters are those of WGE(...) under the same seed
        wge = WGE(num_nodes, num_relations, hidden_channels=hidden_channels, **kwargs)
        super().__init__(num_nodes, num_relations, wge.channels, sparse)
        self.hidden_channels = hidden_channels  # in quaternions, as QuatE's (KGEModel's is the real width)
        # KGEModel's embeddings hold WGE's weights: one Parameter each under both names (rel_emb with
        # 2R rows). Tied Parameters, not one module under two names, which torch.func.functional_call
        # would leave holding the weights it was given.
        self.rel_emb = torch.nn.Embedding(2 * num_relations, wge.channels, sparse=sparse)
        self.node_emb.weight = wge.entity_embedding.weight
        self.rel_emb.weight = wge.relation_embedding.weight
        self.wge = wge
        self.register_state_dict_post_hook(_drop_shared_names)
        self.register_load_state_dict_pre_hook(_fill_shared_names)
        self.register_load_state_dict_post_hook(_tie_shared_weights)
        self.loss_fn = loss_fn if loss_fn is not None else OneToNLoss()
        self.data = data  # the graph the scores are a function of (see the class docstring)
        self.wge.graph_inputs(data)  # fails early when a view is missing
        self._graph: Optional[Tuple[Tuple[Any, ...], Dict[str, Adj]]] = None  # (its source, the adjacencies)

    def __getstate__(self) -> Dict[str, Any]:
        # a copy or a pickle starts without the adjacencies: they are rebuilt from its data
        state = self.__dict__.copy()
        state["_graph"] = None
        return state

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
        tensor edited in place) and the embeddings' device and dtype stay the same. Inside a
        :mod:`torch.func` transform, where torch builds no sparse CSR tensor, they are ``edge_index``
        tensors."""
        weight = self.wge.entity_embedding.weight
        source = self._graph_source(weight)
        if self._graph is not None and source is not None and _same(self._graph[0], source):
            return self._graph[1]
        sparse = not in_function_transform()
        inputs = {k: v.to(weight.device) for k, v in self.wge.graph_inputs(self.data, sparse=sparse).items()}
        self._graph = None if source is None or not sparse else (source, inputs)
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


# (KGEModel's name, WGE's name) of each shared embedding module
_SHARED_NAMES = (("node_emb", "wge.entity_embedding"), ("rel_emb", "wge.relation_embedding"))


def _drop_shared_names(module: torch.nn.Module, state_dict: Dict[str, Any], prefix: str, local_metadata: Any) -> None:
    """A state dict holds each shared embedding weight once, under KGEModel's name."""
    for _, wge_name in _SHARED_NAMES:
        state_dict.pop(f"{prefix}{wge_name}.weight", None)


def _fill_shared_names(
    module: torch.nn.Module,
    state_dict: Dict[str, Any],
    prefix: str,
    local_metadata: Any,
    strict: bool,
    missing_keys: List[str],
    unexpected_keys: List[str],
    error_msgs: List[str],
) -> None:
    """Loads a shared embedding weight given under either name (KGEModel's where both are) under both
    names, so that neither is reported missing."""
    for kge_name, wge_name in _SHARED_NAMES:
        kge_key, wge_key = f"{prefix}{kge_name}.weight", f"{prefix}{wge_name}.weight"
        if kge_key in state_dict:
            state_dict[wge_key] = state_dict[kge_key]
        elif wge_key in state_dict:
            state_dict[kge_key] = state_dict[wge_key]


def _tie_shared_weights(module: torch.nn.Module, incompatible_keys: Any) -> None:
    """After a load (``assign=True`` puts a new Parameter under each name), both names hold one Parameter again."""
    for kge_name, wge_name in _SHARED_NAMES:
        kge_embedding = module.get_submodule(kge_name)
        wge_embedding = module.get_submodule(wge_name)
        if wge_embedding.weight is not kge_embedding.weight:
            wge_embedding.weight = kge_embedding.weight


def _same(first: Any, second: Any) -> bool:
    """Whether two graph sources are the same: tensors, data and other objects compared by identity,
    numbers, strings, devices and dtypes by value, tuples item by item."""
    if isinstance(first, tuple) and isinstance(second, tuple):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    if isinstance(first, (bool, int, float, str, torch.device, torch.dtype)) and type(first) is type(second):
        return first == second
    return first is second
