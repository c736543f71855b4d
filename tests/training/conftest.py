import pytest
import torch
import torch_geometric.transforms as T

from torch_wge.testing import random_kg
from torch_wge.training import TrainConfig
from torch_wge.training import trainer as trainer_module
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform


@pytest.fixture(scope="module")
def small_two_view_kg():
    """A random graph of 40 entities, 4 relations and 400 triples with both views."""
    kg = random_kg(40, 4, 400, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


@pytest.fixture(scope="module")
def tiny_two_view_kg():
    """A random graph of 30 entities, 3 relations and 240 triples with both views."""
    kg = random_kg(30, 3, 240, seed=5)
    return T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.5)])(kg)


@pytest.fixture
def small_config():
    """``small_config(**settings)``: a :class:`TrainConfig` for ``small_two_view_kg``
    (4 epochs of 4 quaternions per embedding, batch 64, lr 0.01, validation every 2), ``settings`` over it."""

    def make(**settings) -> TrainConfig:
        defaults = dict(
            recipe="paper", dataset="random", epochs=4, hidden_channels=4, batch_size=64, lr=0.01, eval_every=2, seed=3
        )
        return TrainConfig(**{**defaults, **settings})

    return make


@pytest.fixture
def kill_after_epoch(monkeypatch):
    """``kill_after_epoch(make_trainer, epoch)`` trains ``make_trainer()`` until the
    checkpoint of ``epoch`` is on disk and stops it there as a kill would
    (``KeyboardInterrupt`` from the save), then reseeds torch so that a resumed run
    shares nothing with the killed one but its files, as a fresh process would."""

    def run(make_trainer, epoch: int) -> None:
        real_save = trainer_module.save_checkpoint

        def save_then_die(state, path):
            real_save(state, path)
            if str(path).endswith("last.pt") and state["epoch"] == epoch:
                raise KeyboardInterrupt

        monkeypatch.setattr(trainer_module, "save_checkpoint", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            make_trainer().fit()
        monkeypatch.setattr(trainer_module, "save_checkpoint", real_save)
        torch.manual_seed(12345)

    return run


@pytest.fixture
def kg_folder(tmp_path):
    """A folder of triple files (``train.txt``, ``valid.txt``, ``test.txt``) of a random graph of 24
    entities and 3 relations, for the command line."""
    kg = random_kg(24, 3, 160, seed=2)
    for name, mask in (("train", "train"), ("valid", "val"), ("test", "test")):
        rows = zip(*kg.edge_index[:, kg[f"{mask}_mask"]].tolist(), kg.edge_type[kg[f"{mask}_mask"]].tolist())
        (tmp_path / f"{name}.txt").write_text("".join(f"e{h}\tr{r}\te{t}\n" for h, t, r in rows))
    return tmp_path
