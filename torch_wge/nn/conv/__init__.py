from torch_wge.nn.conv.quaternion_gcn_conv import QuaternionGCNConv

__all__ = ["QuaternionGCNConv"]
