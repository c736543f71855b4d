from torch_wge.nn.norm.synced_batch_norm import SyncedBatchNorm1d, normalize_together

__all__ = ["SyncedBatchNorm1d", "normalize_together"]
