from torch_wge.nn.models.two_view_encoder import TwoViewEncoder
from torch_wge.nn.models.wge import WGE, EncodedGraph

__all__ = ["TwoViewEncoder", "WGE", "EncodedGraph"]
