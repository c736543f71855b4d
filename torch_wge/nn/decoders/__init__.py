from torch_wge.nn.decoders.quate_decoder import QuatEDecoder

__all__ = ["QuatEDecoder"]
