import math
from typing import Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch.nn.parameter import UninitializedParameter

from torch_wge.utils.quaternion import check_quaternion_size, quaternion_matrix


class QuaternionLinear(torch.nn.Module):
    r"""The quaternion linear transformation of QGNN
    (`"Quaternion Graph Neural Networks" <https://arxiv.org/abs/2008.05089>`_):
    the Hamilton product of a quaternion weight matrix
    :math:`\mathbf{W} = W_r + W_i\mathsf{i} + W_j\mathsf{j} + W_k\mathsf{k}`
    with each row's quaternion vector,

    .. math::
        \mathbf{x}^{\prime} = \mathbf{W} \otimes \mathbf{x} + \mathbf{b}

    Features use the block layout ``[r | i | j | k]`` of
    :mod:`torch_wge.utils.quaternion`, so both channel counts are real
    sizes and multiples of 4. The product is one matmul with the real
    :math:`F_{in} \times F_{out}` matrix the four blocks make
    (:func:`~torch_wge.utils.quaternion.quaternion_matrix`), so a quaternion
    layer holds a quarter of the parameters of a real one of the same size.

    Args:
        in_channels (int): Size of each input sample (a multiple of 4), or
            :obj:`-1` to infer it from the first input (lazy initialisation,
            as :class:`torch_geometric.nn.dense.Linear`).
        out_channels (int): Size of each output sample (a multiple of 4).
        bias (bool, optional): If set to :obj:`False`, learns no additive bias.
            (default: :obj:`True`)
        matmul_dtype (torch.dtype, optional): The dtype the product of a
            float32 input is formed in, e.g. :obj:`torch.bfloat16` where the
            device multiplies it natively
            (:func:`~torch_wge.nn.auto_matmul_dtype`): the input and the
            matrix are cast to it, the product back to float32; the
            parameters, the bias and the output keep their dtype. Inputs of
            other dtypes (float64) are multiplied in their own.
            (default: :obj:`None`)

    Shapes:
        - **input:** :math:`(*, F_{in})`
        - **output:** :math:`(*, F_{out})`

    Example:
        >>> lin = QuaternionLinear(-1, 8)
        >>> lin(torch.randn(3, 4)).shape
        torch.Size([3, 8])
        >>> lin.weight.shape  # [4, in quaternions, out quaternions]
        torch.Size([4, 1, 2])
    """

    matmul_dtype: Optional[torch.dtype]

    def __init__(
        self, in_channels: int, out_channels: int, bias: bool = True, matmul_dtype: Optional[torch.dtype] = None
    ):
        super().__init__()
        name = self.__class__.__name__
        if in_channels != -1:
            check_quaternion_size(in_channels, f"'{name}' in_channels")
        out_quaternions = check_quaternion_size(out_channels, f"'{name}' out_channels")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.matmul_dtype = matmul_dtype
        self.weight: Union[Parameter, UninitializedParameter]  # uninitialised until the first call with in_channels=-1
        if in_channels == -1:
            self.weight = UninitializedParameter()
            self._initialize_hook = self.register_forward_pre_hook(self._initialize_parameters)
        else:
            self.weight = Parameter(torch.empty(4, in_channels // 4, out_quaternions))
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        r"""Glorot-uniform initialisation of the real matrix the quaternion
        weight represents, :math:`U(-a, a)` with
        :math:`a = \sqrt{6 / (F_{in} + F_{out})}`; zero bias."""
        if self.in_channels != -1:
            bound = math.sqrt(6.0 / (self.in_channels + self.out_channels))
            torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def _materialize(self, in_channels: int):
        check_quaternion_size(in_channels, f"'{self.__class__.__name__}' input size")
        self.in_channels = in_channels
        assert isinstance(self.weight, UninitializedParameter)  # materialised once, by the first call
        self.weight.materialize((4, in_channels // 4, self.out_channels // 4))
        self._initialize_hook.remove()
        del self._initialize_hook
        self.reset_parameters()

    @torch.no_grad()
    def _initialize_parameters(self, module: torch.nn.Module, inputs: tuple):
        self._materialize(inputs[0].size(-1))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        weight = state_dict.get(prefix + "weight")
        if weight is not None and isinstance(self.weight, UninitializedParameter):
            self._materialize(4 * weight.size(1))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def matrix(self) -> Tensor:
        r"""The real matrix ``[F_in, F_out]`` that applies :math:`\mathbf{W} \otimes`."""
        return quaternion_matrix(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        if x.size(-1) != self.in_channels:
            raise ValueError(
                f"'QuaternionLinear' expected {self.in_channels} input channels, got features of shape {x.shape}"
            )
        matmul_dtype = self.matmul_dtype
        if matmul_dtype is None or x.dtype != torch.float32:
            return torch.nn.functional.linear(x, self.matrix().t(), self.bias)  # x @ M + b, one fused matmul
        out = torch.nn.functional.linear(x.to(matmul_dtype), self.matrix().t().to(matmul_dtype)).to(x.dtype)
        return out if self.bias is None else out + self.bias

    def __repr__(self) -> str:
        dtype = "" if self.matmul_dtype is None else f", matmul_dtype={self.matmul_dtype}"
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, bias={self.bias is not None}{dtype})"
        )
