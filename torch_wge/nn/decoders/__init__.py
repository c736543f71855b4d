from torch_wge.nn.decoders.loss import OneToNLoss
from torch_wge.nn.decoders.quate_decoder import QuatEDecoder, quate_query

__all__ = ["OneToNLoss", "QuatEDecoder", "quate_query"]
