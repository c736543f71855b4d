from torch_wge.nn.dense.quaternion_linear import QuaternionLinear

__all__ = ["QuaternionLinear"]
