from torch_wge.nn.conv import QuaternionGCNConv, TwoViewConv
from torch_wge.nn.kge import QuatEDecoder
from torch_wge.nn.models import WGE, EncodedGraph, TwoViewEncoder

__all__ = ["QuaternionGCNConv", "TwoViewConv", "QuatEDecoder", "TwoViewEncoder", "WGE", "EncodedGraph"]
