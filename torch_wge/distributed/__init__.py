r"""Training over several processes: the process context (:class:`DistributedContext`), the
two-view encoder computed in shares of its rows (:class:`ShardedTwoViewEncoder`) and batch norms
over the batches of all processes (:class:`SyncedBatchNorm1d`, :func:`batch_norm_together`)."""

from torch_wge.distributed.batch_norm import SyncedBatchNorm1d, batch_norm_together, normalize_synced
from torch_wge.distributed.context import DistributedContext, dropout_seed, is_collective_failure, resolve_device
from torch_wge.distributed.sharded_encoder import RowShares, ShardedTwoViewEncoder, shard_encoder

__all__ = [
    "DistributedContext",
    "RowShares",
    "ShardedTwoViewEncoder",
    "SyncedBatchNorm1d",
    "batch_norm_together",
    "dropout_seed",
    "is_collective_failure",
    "normalize_synced",
    "resolve_device",
    "shard_encoder",
]
