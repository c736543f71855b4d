from torch_wge.nn.kge.quate import QuatE
from torch_wge.nn.kge.wge_kge import WGEKGE

__all__ = ["QuatE", "WGEKGE"]
