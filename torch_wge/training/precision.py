"""Numeric precision of training and evaluation: what ``TrainConfig.precision`` selects."""

import contextlib
from typing import Dict, Iterator, NamedTuple, Optional, Union

import torch

from torch_wge.utils.devices import auto_matmul_dtype


class Precision(NamedTuple):
    #: Dtype of the 1-N loss's scoring matmuls (:obj:`None`: the parameters' float32).
    loss_matmul_dtype: Optional[torch.dtype]
    #: :func:`torch.set_float32_matmul_precision` during training and evaluation.
    float32_matmul: str
    #: Dtype of the encoder's quaternion matmuls (:obj:`None`: the parameters' float32).
    encoder_matmul_dtype: Optional[torch.dtype] = None


#: ``"auto"`` (the default): ``"bf16"`` on a device with native bfloat16
#: matmuls (:func:`~torch_wge.utils.devices.has_native_bf16`: a CPU with
#: AVX-512 BF16 or AMX, a CUDA GPU from Ampere on), else ``"float32"``; see
#: :func:`resolve_precision`.
#: ``"float32"``: every matmul in float32 (the paper's).
#: ``"tf32"``: float32 matmuls may use TensorFloat-32 (CUDA devices from Ampere
#: on; the CPU is not affected), during training and evaluation.
#: ``"bf16"``: the scoring matmuls of the training loss, most of an epoch's
#: FLOPs, and the encoder's quaternion matmuls take bfloat16 operands (the
#: logits, the loss, the gradients, the parameters, the propagation, the norms
#: and every layer's output stay float32; see
#: :func:`~torch_wge.nn.decoders.loss.one_to_n_loss` and
#: :class:`~torch_wge.nn.QuaternionLinear`); evaluation scores in float32 (its
#: encoder pass takes the encoder's bfloat16 products too).
#: Fast on GPUs with bf16 tensor cores and on CPUs with bf16 instructions;
#: elsewhere slower than float32.
PRECISIONS: Dict[str, Precision] = {
    "auto": Precision(None, "highest"),  # resolved per device before use
    "float32": Precision(None, "highest"),
    "tf32": Precision(None, "high"),
    "bf16": Precision(torch.bfloat16, "highest", torch.bfloat16),
}


def resolve_precision(precision: str, device: Union[str, torch.device], dtype: Optional[torch.dtype] = None) -> str:
    """The precision ``precision`` names on ``device`` for parameters of ``dtype`` (default:
    :func:`torch.get_default_dtype`): ``"auto"`` becomes ``"bf16"`` for float32 parameters where
    the device has native bfloat16 matmuls (:func:`~torch_wge.utils.devices.auto_matmul_dtype`),
    else ``"float32"``; any other name is itself.

    Example:
        >>> resolve_precision("float32", "cpu"), resolve_precision("auto", "meta")
        ('float32', 'float32')
    """
    if precision != "auto":
        return precision
    return "float32" if auto_matmul_dtype(device, dtype) is None else "bf16"


@contextlib.contextmanager
def float32_matmul_precision(precision: str) -> Iterator[None]:
    """Sets :func:`torch.set_float32_matmul_precision` for the block and restores the previous value."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(PRECISIONS[precision].float32_matmul)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
