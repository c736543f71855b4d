from torch_wge.nn.kge.quate_decoder import QuatEDecoder

__all__ = ["QuatEDecoder"]
