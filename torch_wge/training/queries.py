"""The trainer's 1-N training queries: :class:`torch_wge.data.TrainingQueries`, also named here
(``torch_wge.training.TrainingQueries``)."""

from torch_wge.data.queries import TrainingQueries

__all__ = ["TrainingQueries"]
