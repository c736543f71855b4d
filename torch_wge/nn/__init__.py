from torch_wge.nn.conv import QuaternionGCNConv, TwoViewConv
from torch_wge.nn.decoders import OneToNLoss, QuatEDecoder, auto_matmul_dtype
from torch_wge.nn.dense import QuaternionLinear
from torch_wge.nn.models import WGE, EncodedGraph, TwoViewEncoder

__all__ = [
    "QuaternionLinear",
    "QuaternionGCNConv",
    "TwoViewConv",
    "QuatEDecoder",
    "OneToNLoss",
    "TwoViewEncoder",
    "WGE",
    "EncodedGraph",
    "auto_matmul_dtype",
]
