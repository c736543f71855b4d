from torch_wge.nn.conv import QuaternionGCNConv
from torch_wge.nn.kge import QuatEDecoder
from torch_wge.nn.models import WGE, EncodedGraph, TwoViewEncoder

__all__ = ["QuaternionGCNConv", "QuatEDecoder", "TwoViewEncoder", "WGE", "EncodedGraph"]
