"""What a device computes natively: the choice behind ``precision="auto"``."""

import functools
from typing import FrozenSet, Optional, Union

import torch

#: CPU flags (``/proc/cpuinfo``) of native bfloat16 arithmetic: AVX-512 BF16
#: (AMD Zen 4, Intel Cooper Lake and later) and the AMX tiles (Intel Sapphire Rapids and later).
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@functools.lru_cache(maxsize=None)
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> FrozenSet[str]:
    """The flags of the first CPU in ``cpuinfo``; empty where the file cannot be read
    (outside Linux), so that nothing is assumed of an unknown CPU."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def has_native_bf16(device: Union[str, torch.device]) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices in hardware: a CPU whose flags
    include one of :data:`BF16_CPU_FLAGS`, or a CUDA GPU with bfloat16 tensor cores
    (compute capability 8.0, Ampere, or later). Read from the hardware, not timed.

    Example:
        >>> has_native_bf16("meta")
        False
    """
    device = torch.device(device)
    if device.type == "cpu":
        return bool(cpu_flags() & BF16_CPU_FLAGS)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.get_device_capability(device)[0] >= 8
    return False


def auto_matmul_dtype(device: Union[str, torch.device], dtype: Optional[torch.dtype] = None) -> Optional[torch.dtype]:
    r"""The dtype of the training loss's scoring matmuls that ``precision="auto"``
    chooses for parameters of ``dtype`` (default: :func:`torch.get_default_dtype`)
    on ``device``: :obj:`torch.bfloat16` for float32 parameters where bfloat16 is
    native (:func:`has_native_bf16`), else :obj:`None` (the parameters' own dtype:
    a float64 model keeps its precision). It is the ``matmul_dtype`` of
    :class:`~torch_wge.nn.OneToNLoss`.

    Example:
        >>> from torch_wge.nn import OneToNLoss
        >>> loss_fn = OneToNLoss(objective="softmax", matmul_dtype=auto_matmul_dtype("cpu"))
    """
    float32 = (torch.get_default_dtype() if dtype is None else dtype) == torch.float32
    return torch.bfloat16 if float32 and has_native_bf16(device) else None
