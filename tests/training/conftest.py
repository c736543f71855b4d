import pytest
import torch

from torch_wge.training import trainer as trainer_module


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
