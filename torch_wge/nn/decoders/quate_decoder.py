import torch
import torch.nn.functional as F
from torch import Tensor

from torch_wge.utils.quaternion import check_quaternion_size, hamilton_product, normalize_quaternion


def quate_query(h: Tensor, r: Tensor) -> Tensor:
    r"""The QuatE query :math:`\mathbf{x}_h \otimes \mathbf{r}^{\triangleleft}`
    of heads ``h`` and relations ``r`` (every quaternion of ``r`` normalised to
    unit length first): its quaternion inner product with a tail's embedding
    :math:`\mathbf{x}_t` is the QuatE score :math:`(\mathbf{x}_h \otimes
    \mathbf{r}^{\triangleleft}) \bullet \mathbf{x}_t`
    (`"Quaternion Knowledge Graph Embeddings" <https://arxiv.org/abs/1904.10281>`_).

    Shapes: ``h [..., 4n]`` and ``r [..., 4n]`` give ``[..., 4n]``.

    Example:
        >>> h, r = torch.tensor([[1.0, 2.0, 0.0, 0.0]]), torch.tensor([[0.0, 0.0, 3.0, 0.0]])
        >>> quate_query(h, r)  # (1 + 2i) j = j + 2k
        tensor([[0., 0., 1., 2.]])
    """
    return hamilton_product(h, normalize_quaternion(r))


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    r"""Inverted dropout, as :func:`torch.nn.functional.dropout`: in training
    each element is zeroed with probability :math:`p` and the others scaled by
    :math:`1 / (1 - p)`. On the CPU the mask comes from a uniform draw per
    element (``rand_like(x) >= p``), which there costs a third of the Bernoulli
    draw of :func:`~torch.nn.functional.dropout`; elsewhere it is
    :func:`~torch.nn.functional.dropout`, one kernel. The masks
    differ from that function's for the same seed, not in distribution.

    Shapes: ``x [*]`` gives ``[*]``.

    Example:
        >>> x = torch.ones(2, 4)
        >>> out = dropout(x, 0.5)
        >>> bool(((out == 0) | (out == 2)).all()), dropout(x, 0.5, training=False) is x
        (True, True)
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training)
    return x * (torch.rand_like(x) >= p).to(x.dtype) * (1.0 / (1.0 - p))


class QuatEDecoder(torch.nn.Module):
    r"""The QuatE score function
    (`"Quaternion Knowledge Graph Embeddings" <https://arxiv.org/abs/1904.10281>`_)
    as used by each layer of WGE's decoder:

    .. math::
        f(h, r, t) = \mathrm{drop}\left(\mathrm{BN}\left(\mathbf{x}_h \otimes
        \mathbf{r}^{\triangleleft}\right)\right) \bullet \mathbf{x}_t

    where :math:`\mathbf{r}^{\triangleleft}` normalises each quaternion of the
    relation to unit length, :math:`\otimes` is the element-wise Hamilton
    product and :math:`\bullet` the quaternion inner product. The batch norm
    and dropout on the query :math:`\mathbf{x}_h \otimes \mathbf{r}^{\triangleleft}`
    follow the WGE research code; with :obj:`batch_norm=False` and
    :obj:`dropout=0.0` this is exactly QuatE. The decoder holds no embeddings:
    it scores whatever quaternion vectors it is given.

    Args:
        channels (int): Size of each embedding (a multiple of 4).
        dropout (float, optional): Dropout probability on the query.
            (default: :obj:`0.0`)
        batch_norm (bool, optional): If :obj:`True`, applies
            :class:`torch.nn.BatchNorm1d` to the query before dropout.
            (default: :obj:`True`)

    The module maps a head and a relation to the query (:meth:`forward`), whose
    dot product with the tail is the score (:meth:`score`, :meth:`score_all`),
    so that hooks on the module see every query it scores with.

    Shapes:
        - **forward:** ``h [B, C]``, ``r [B, C]`` give the queries ``[B, C]``
        - **score:** ``h [B, C]``, ``r [B, C]``, ``t [B, C]`` give ``[B]``
        - **score_all:** ``h [B, C]``, ``r [B, C]``, ``x [N, C]`` give ``[B, N]``

    Example:
        >>> decoder = QuatEDecoder(8, batch_norm=False)
        >>> h, r, x = torch.randn(2, 8), torch.randn(2, 8), torch.randn(5, 8)
        >>> decoder.score_all(h, r, x).shape
        torch.Size([2, 5])
    """

    def __init__(self, channels: int, dropout: float = 0.0, batch_norm: bool = True):
        super().__init__()
        check_quaternion_size(channels, f"'{self.__class__.__name__}' channels")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"'{self.__class__.__name__}' dropout must be in [0, 1), got {dropout}")
        self.channels = channels
        self.dropout = dropout
        self.batch_norm = torch.nn.BatchNorm1d(channels) if batch_norm else None

    def reset_parameters(self):
        if self.batch_norm is not None:
            self.batch_norm.reset_parameters()

    def forward(self, h: Tensor, r: Tensor, normalized: bool = False) -> Tensor:
        r"""The queries
        :math:`\mathrm{drop}(\mathrm{BN}(\mathbf{x}_h \otimes \mathbf{r}^{\triangleleft}))`
        of heads ``h [B, C]`` and relations ``r [B, C]``, ``[B, C]``: a query's
        dot product with a tail embedding is the triple's score. With
        :obj:`normalized=True`, ``r`` holds unit quaternions already (rows of a
        relation table normalised once, cheaper than normalising every gathered
        row)."""
        q = hamilton_product(h, r) if normalized else quate_query(h, r)
        if self.batch_norm is not None:
            q = self.batch_norm(q)
        return dropout(q, self.dropout, self.training)

    @torch.jit.export
    def score(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        """Scores of the triples ``(h[b], r[b], t[b])``, ``[B]``."""
        return (self(h, r, False) * t).sum(dim=-1)

    @torch.jit.export
    def score_all(self, h: Tensor, r: Tensor, x: Tensor) -> Tensor:
        """Scores of ``(h[b], r[b], x[n])`` for every candidate tail ``n``, ``[B, N]``."""
        return self(h, r, False) @ x.t()

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.channels}, dropout={self.dropout}, "
            f"batch_norm={self.batch_norm is not None})"
        )
