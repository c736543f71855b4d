from torch_wge.nn.decoders.loss import OneToNLoss
from torch_wge.nn.decoders.quate_decoder import QuatEDecoder, quate_query
from torch_wge.utils.devices import auto_matmul_dtype

__all__ = ["OneToNLoss", "QuatEDecoder", "quate_query", "auto_matmul_dtype"]
