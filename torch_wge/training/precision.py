"""Numeric precision of training and evaluation: what ``TrainConfig.precision`` selects."""

import contextlib
from typing import Dict, Iterator, NamedTuple, Optional

import torch


class Precision(NamedTuple):
    #: Dtype of the 1-N loss's scoring matmuls (:obj:`None`: the parameters' float32).
    loss_matmul_dtype: Optional[torch.dtype]
    #: :func:`torch.set_float32_matmul_precision` during training and evaluation.
    float32_matmul: str


#: ``"float32"``: every matmul in float32 (the default and the paper's).
#: ``"tf32"``: float32 matmuls may use TensorFloat-32 (CUDA devices from Ampere
#: on; the CPU is not affected), during training and evaluation.
#: ``"bf16"``: the scoring matmuls of the training loss, most of an epoch's
#: FLOPs, take bfloat16 operands (the logits, the loss and the gradients stay
#: float32; see :func:`~torch_wge.nn.decoders.loss.one_to_n_loss`); the encoder
#: and evaluation stay float32. Fast on GPUs with bf16 tensor cores; on a CPU
#: without bf16 instructions it is slower than float32.
PRECISIONS: Dict[str, Precision] = {
    "float32": Precision(None, "highest"),
    "tf32": Precision(None, "high"),
    "bf16": Precision(torch.bfloat16, "highest"),
}


@contextlib.contextmanager
def float32_matmul_precision(precision: str) -> Iterator[None]:
    """Sets :func:`torch.set_float32_matmul_precision` for the block and restores the previous value."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(PRECISIONS[precision].float32_matmul)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
