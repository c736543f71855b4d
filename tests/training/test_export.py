"""torch-wge export and predict on a run of a dataset with labels: the exported files hold the
checkpoint's own tensors, in the order of the dataset's names; predict takes labels for identifiers."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from torch_wge.cli import main
from torch_wge.inference import graph_inputs_on, load_embeddings, load_trained
from torch_wge.inference.export import metadata_tsv
from torch_wge.testing import random_kg, write_triples_folder
from torch_wge.training import load_checkpoint, open_dataset

NUM_LAYERS = 2


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run of 2 epochs with 2 encoder layers on a folder of triples with labels
    (entity e00i is "entity i", but e004 and e005 are both "twin"; P0, P1, P2 are "knows", "likes", "owns")."""
    tmp = tmp_path_factory.mktemp("export")
    entity_labels = {i: "twin" if i in (4, 5) else f"entity {i}" for i in range(30)}
    relation_labels = {0: "knows", 1: "likes", 2: "owns"}
    kg = write_triples_folder(random_kg(30, 3, 300, seed=7), tmp / "kg", entity_labels, relation_labels)
    root = str(tmp / "data")
    argv = ["train", "--dataset", str(kg), "--root", root, "--epochs", "2", "--hidden-channels", "2"]
    argv += ["--num-layers", str(NUM_LAYERS), "--out", str(tmp / "run"), "--no-progress", "--no-tensorboard"]
    assert main(argv) == 0
    return tmp / "run", open_dataset(str(kg), root)


@pytest.fixture(scope="module")
def encoded(run):
    """Every layer's representations, recomputed from the loaded best checkpoint."""
    model, _, _, data = load_trained(run[0] / "best.pt", device="cpu")
    with torch.no_grad():
        encoded = model.encode(**graph_inputs_on(model, data))
    return SimpleNamespace(
        entities=[x.detach() for x in encoded.entities], relations=[r.detach() for r in encoded.relations]
    )


def test_export_writes_every_layer_equal_to_the_checkpoint(run, encoded, tmp_path):
    folder, dataset = run
    assert main(["export", str(folder), "--all-layers", "--out", str(tmp_path), "--device", "cpu"]) == 0
    state = load_checkpoint(folder / "best.pt")["model"]
    assert np.array_equal(np.load(tmp_path / "entities_layer0.npy"), state["entity_embedding.weight"].numpy())
    assert np.array_equal(np.load(tmp_path / "relations_layer0.npy"), state["relation_embedding.weight"].numpy())
    for k in range(NUM_LAYERS + 1):
        entities, relations = (
            np.load(tmp_path / f"entities_layer{k}.npy"),
            np.load(tmp_path / f"relations_layer{k}.npy"),
        )
        assert entities.shape == (30, 8) and relations.shape == (6, 8) and entities.dtype == np.float32
        assert np.array_equal(entities, encoded.entities[k].numpy())
        assert np.array_equal(relations, encoded.relations[k].numpy())
        # the projector's vectors file reads back to the same float32 values
        assert np.array_equal(np.loadtxt(tmp_path / f"entities_layer{k}.tsv", dtype=np.float32, ndmin=2), entities)
    assert not np.array_equal(encoded.entities[NUM_LAYERS].numpy(), encoded.entities[0].numpy())
    entity_lines = (tmp_path / "entities_metadata.tsv").read_text().splitlines()
    labels = ["twin" if n in ("e004", "e005") else f"entity {int(n[1:])}" for n in dataset.entity_names]
    assert entity_lines == ["name\tlabel"] + [f"{n}\t{label}" for n, label in zip(dataset.entity_names, labels)]
    relation_lines = (tmp_path / "relations_metadata.tsv").read_text().splitlines()
    names = list(dataset.relation_names)
    labels = {"P0": "knows", "P1": "likes", "P2": "owns"}
    assert relation_lines == ["name\tlabel\tdirection"] + [f"{n}\t{labels[n]}\tforward" for n in names] + [
        f"{n}\t{labels[n]}\tinverse" for n in names
    ]


def test_export_by_default_writes_the_input_embeddings_and_the_last_layer(run, encoded, tmp_path):
    folder, _ = run
    assert main(["export", str(folder / "best.pt"), "--out", str(tmp_path), "--format", "pt", "--device", "cpu"]) == 0
    arrays = sorted(p.name for p in tmp_path.glob("*.pt"))
    assert arrays == [f"{kind}_layer{k}.pt" for kind in ("entities", "relations") for k in (0, NUM_LAYERS)]
    assert torch.equal(torch.load(tmp_path / f"entities_layer{NUM_LAYERS}.pt"), encoded.entities[NUM_LAYERS])
    assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_load_embeddings_for_notebooks(run, encoded):
    folder, dataset = run
    arrays = load_embeddings(folder, device="cpu")
    assert torch.equal(arrays["relations_layer2"], encoded.relations[2])
    assert "entities_layer1" not in arrays
    assert arrays["entity_names"] == list(dataset.entity_names)
    assert arrays["entity_labels"] == list(dataset.entity_labels)
    names = list(dataset.relation_names)
    assert arrays["relation_names"] == names + [f"{n} (inverse)" for n in names]
    assert arrays["relation_labels"][dataset.relation_names.index("P1") + 3] == "likes (inverse)"


def test_metadata_rows_are_the_vectors_rows_whatever_the_names_hold():
    # every character at which str.splitlines (or another reader) breaks a line becomes a space
    breaks = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x00", "\t"]
    names = [f"e{i}{char}x" for i, char in enumerate(breaks)]
    text = metadata_tsv({"name": names, "label": [f"label{char}" for char in breaks]})
    lines = text.splitlines()
    assert len(lines) == 1 + len(names)
    assert lines[1:] == [f"e{i} x\tlabel " for i in range(len(breaks))]


def test_metadata_has_a_header_only_with_several_columns():
    assert metadata_tsv({"name": ["a", "b"]}) == "a\nb\n"
    assert metadata_tsv({"name": ["a", "b"], "label": ["x\ty\nz", None]}) == "name\tlabel\na\tx y z\nb\t\n"


def test_export_refuses_a_run_without_best_checkpoint_and_an_output_file(run, tmp_path, capsys):
    assert main(["export", str(tmp_path)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"{tmp_path / 'best.pt'}: no best checkpoint (the run was never validated)")
    )
    (tmp_path / "file").write_text("")
    assert main(["export", str(run[0]), "--out", str(tmp_path / "file"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is a file, not a folder" in err


def predict_lines(run, *argv):
    return main(["predict", str(run[0] / "best.pt"), *argv, "--top-k", "4", "--device", "cpu"])


def test_predict_takes_labels_and_prints_them(run, capsys):
    assert predict_lines(run, "--head", "e007", "--relation", "P1") == 0
    by_identifier = capsys.readouterr().out.splitlines()
    assert predict_lines(run, "--head", "entity 7", "--relation", "likes") == 0
    assert capsys.readouterr().out.splitlines() == by_identifier
    assert by_identifier[0].startswith('top 4 tails of (e007 "entity 7", P1 "likes", ?) by score, the model\'s logit')
    assert predict_lines(run, "--tail", "entity 7", "--relation", "owns") == 0
    assert capsys.readouterr().out.splitlines()[0].startswith('top 4 heads of (?, P2 "owns", e007 "entity 7") by score')


def test_predict_refuses_a_label_of_several_entities(run, capsys):
    assert predict_lines(run, "--head", "twin", "--relation", "P1") == 2
    err = capsys.readouterr().err.strip()
    assert "entity label 'twin' names 2 entities of" in err and err.endswith("(e004, e005, ...); give its identifier")
    assert len(err.splitlines()) == 1
    assert predict_lines(run, "--head", "e007", "--relation", "hates") == 2
    assert "unknown relation 'hates': not among the 3 relations of" in capsys.readouterr().err
