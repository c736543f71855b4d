"""The settings ``benchmarks/reproduce.py`` trains a row with: the paper's recipe unless
``--recipe`` names another, the row's own settings, a resumed run's saved ones and the
command line's, each overriding the one before."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproduce.py"


@pytest.fixture(scope="module")
def reproduce():
    spec = importlib.util.spec_from_file_location("reproduce", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_row_trains_the_paper_recipe_by_default(reproduce):
    config = reproduce.row_config("codex-s/wge", given={}, saved={})
    # the paper's setting, written out: Adam 5e-4 constant, 1-N BCE, 3000 epochs
    assert (config.recipe, config.epochs, config.lr, config.schedule) == ("paper", 3000, 5e-4, "constant")
    assert (config.objective, config.weight_decay, config.eval_every) == ("bce", 0.0, 10)


def test_recipe_option_replaces_the_paper_recipe(reproduce):
    config = reproduce.row_config("fb15k-237/quate", given={"recipe": "large"}, saved={})
    assert (config.dataset, config.num_layers) == ("fb15k-237", 0)
    assert (config.recipe, config.epochs, config.lr, config.candidates) == ("large", 80, 1e-2, 2000)
    assert (config.objective, config.eval_every) == ("softmax", 2)


def test_row_settings_then_saved_then_given_override(reproduce):
    config = reproduce.row_config(
        "codex-s/beta/0.5", given={"lr": 2e-3}, saved={"epochs": 200, "lr": 1e-3, "recipe": "fast"}
    )
    assert config.beta == 0.5  # the row's
    assert (config.recipe, config.epochs) == ("fast", 200)  # the saved run's
    assert config.lr == 2e-3  # the command line's
    assert config.weight_decay == 0.1  # filled in by the saved run's recipe


def test_dataset_other_than_the_rows_is_refused(reproduce):
    with pytest.raises(ValueError, match="--dataset codex-m is not the dataset of row codex-s/wge"):
        reproduce.row_config("codex-s/wge", given={"dataset": "codex-m"}, saved={})


@pytest.mark.parametrize(
    "row, given, variant, folder",
    [
        ("codex-s/wge", {}, "", "codex-s/wge/paper-3000ep"),
        ("litwd1k/quate", {"recipe": "fast", "seed": 1}, "seed1", "litwd1k/quate/fast-500ep-seed1"),
        ("fb15k-237/wge", {"recipe": "large", "epochs": 150}, "", "fb15k-237/wge/large-150ep"),
        ("codex-s/beta/0.5", {"epochs": 60, "lr": 2e-3}, "lr2e-3", "codex-s/wge/paper-60ep-lr2e-3-beta0.5"),
        ("codex-s/hidden-channels/128", {"epochs": 60}, "", "codex-s/wge/paper-60ep-hidden-channels128"),
        ("codex-s/ablation/gcn", {"epochs": 60}, "lr2e-3", "codex-s/wge/paper-60ep-lr2e-3-gcn"),
    ],
)
def test_record_folder_names_dataset_model_recipe_epochs_and_variant(reproduce, row, given, variant, folder):
    config = reproduce.row_config(row, given=given, saved={})
    assert reproduce.record_folder(row, config, variant) == folder
