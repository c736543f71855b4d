from torch_wge.utils.quaternion import (
    check_quaternion_size,
    hamilton_product,
    normalize_quaternion,
    quaternion_components,
    quaternion_inner,
    quaternion_matrix,
    quaternion_norm,
)

__all__ = [
    "check_quaternion_size",
    "quaternion_components",
    "hamilton_product",
    "quaternion_norm",
    "normalize_quaternion",
    "quaternion_inner",
    "quaternion_matrix",
]
