from torch_wge.nn.conv.quaternion_gcn_conv import QuaternionGCNConv
from torch_wge.nn.conv.two_view_conv import TwoViewConv

__all__ = ["QuaternionGCNConv", "TwoViewConv"]
