from typing import List, Sequence

import torch
from torch import Tensor

from torch_wge.nn.dropout import dropout
from torch_wge.nn.norm import normalize_together
from torch_wge.utils.quaternion import (
    check_quaternion_size,
    hamilton_product,
    hamilton_products,
    normalize_quaternion,
)


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

    Shapes:
        - **forward:** ``h [B, C]``, ``r [B, C]``, ``t [B, C]`` give ``[B]``
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

    @torch.jit.export
    def query(self, h: Tensor, r: Tensor, normalized: bool = False) -> Tensor:
        r"""The query vector
        :math:`\mathrm{drop}(\mathrm{BN}(\mathbf{x}_h \otimes \mathbf{r}^{\triangleleft}))`
        of shape ``[B, C]``; its dot product with a tail embedding is the score.
        With :obj:`normalized=True`, ``r`` holds unit quaternions already
        (for instance a relation table normalised once before its rows are
        gathered, which is cheaper than normalising every gathered row)."""
        q = hamilton_product(h, r if normalized else normalize_quaternion(r))
        if self.batch_norm is not None:
            q = self.batch_norm(q)
        return dropout(q, self.dropout, self.training)

    @staticmethod
    def queries_together(
        decoders: Sequence["QuatEDecoder"], hs: Sequence[Tensor], rs: Sequence[Tensor]
    ) -> List[Tensor]:
        r"""``decoders[i].query(hs[i], rs[i], normalized=True)`` for every :math:`i`, the
        Hamilton products formed together (:func:`~torch_wge.utils.quaternion.hamilton_products`:
        one stacked product on a GPU) and the decoders' batch norms applied together
        (:func:`~torch_wge.nn.norm.normalize_together`: synchronising batch norms share one
        all-reduce instead of one each).

        Example:
            >>> decoders = [QuatEDecoder(4), QuatEDecoder(4)]
            >>> hs, rs = [torch.randn(3, 4)] * 2, [normalize_quaternion(torch.randn(3, 4))] * 2
            >>> queries = QuatEDecoder.queries_together(decoders, hs, rs)
            >>> torch.allclose(queries[1], decoders[1].query(hs[1], rs[1], normalized=True))
            True
        """
        products = hamilton_products(hs, rs)
        normalized = normalize_together([decoder.batch_norm for decoder in decoders], products)
        return [dropout(q, decoder.dropout, decoder.training) for decoder, q in zip(decoders, normalized)]

    def forward(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
        """Scores of the triples ``(h[b], r[b], t[b])``, shape ``[B]``."""
        return (self.query(h, r, False) * t).sum(dim=-1)

    @torch.jit.export
    def score_all(self, h: Tensor, r: Tensor, x: Tensor) -> Tensor:
        """Scores of ``(h[b], r[b], x[n])`` for every candidate tail ``n``, shape ``[B, N]``."""
        return self.query(h, r, False) @ x.t()

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.channels}, dropout={self.dropout}, "
            f"batch_norm={self.batch_norm is not None})"
        )
