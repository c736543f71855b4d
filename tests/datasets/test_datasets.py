import os
import shutil
import urllib.error
import warnings
from pathlib import Path

import pytest
import torch
import torch_geometric.datasets.freebase as pyg_freebase
import torch_geometric.transforms as T

import torch_wge.datasets.base as base
from torch_wge.data import combine_splits
from torch_wge.datasets import (
    DATASETS,
    CoDEx,
    DownloadError,
    FB15k237,
    LitWD,
    TriplesFolder,
    dataset_statistics,
    get_dataset,
)
from torch_wge.io import TEMP_INFIX
from torch_wge.transforms import (
    EntityFocusedTransform,
    LeviGraphTransform,
    RelationFocusedTransform,
)

# Table 1 of the paper (and the shared datasets' README).
TABLE1 = {
    "codex-s": (2034, 42, 32888, 1827, 1828),
    "codex-m": (17050, 51, 185584, 10310, 10311),
    "litwd1k": (1533, 47, 26115, 1451, 1451),
    "fb15k-237": (14541, 237, 272115, 17535, 20466),
}


def copy_raw(shared: Path, folder: str, root: Path) -> Path:
    raw = root / folder / "raw"
    shutil.copytree(shared / folder, raw)
    for path in raw.iterdir():  # the shared copies are read-only
        path.chmod(0o644)
    return raw


def no_download(*args, **kwargs):
    raise AssertionError(f"download_url called: {args}")


def counts(data):
    return (
        data.num_nodes,
        data.num_relations,
        int(data.train_mask.sum()),
        int(data.val_mask.sum()),
        int(data.test_mask.sum()),
    )


@pytest.fixture(scope="module")
def codex_s_root(shared_datasets, tmp_path_factory):
    root = tmp_path_factory.mktemp("kg")
    copy_raw(shared_datasets, "codex-s", root)
    return root


@pytest.fixture
def write_folder(tmp_path):
    def write(train, valid="a\tr\tb\n", test="b\tr\ta\n", **extra):
        folder = tmp_path / "kg"
        folder.mkdir(exist_ok=True)
        for name, text in [("train.txt", train), ("valid.txt", valid), ("test.txt", test), *extra.items()]:
            (folder / name.replace("__", ".")).write_text(text)
        return folder

    return write


# Real data ----------------------------------------------------------------


def test_codex_s(codex_s_root, monkeypatch):
    monkeypatch.setattr(base, "download_url", no_download)
    dataset = CoDEx(str(codex_s_root), name="s", log=False)
    assert len(dataset) == 1
    data = dataset[0]
    assert counts(data) == TABLE1["codex-s"]
    assert data.edge_index.dtype == torch.long
    assert data.edge_type.dtype == torch.long
    assert data.train_mask.dtype == torch.bool
    assert data.edge_index.size(1) == 32888 + 1827 + 1828
    # Masks partition the triples: train first, then valid, then test.
    assert bool((data.train_mask.int() + data.val_mask.int() + data.test_mask.int() == 1).all())
    assert bool(data.train_mask[:32888].all())
    # Ids in order of first appearance in train.txt (head before tail).
    first = (codex_s_root / "codex-s" / "raw" / "train.txt").read_text()
    h, r, t = first.split("\n")[0].split("\t")
    assert dataset.entity_names[:2] == [h, t]
    assert dataset.relation_names[0] == r
    assert len(dataset.entity_names) == 2034
    assert len(dataset.relation_names) == 42
    assert dataset.num_entities == 2034 and dataset.num_relations == 42
    # Relation labels from relations.en.json; no entity labels file.
    assert dataset.relation_labels[dataset.relation_names.index("P1412")] == "languages spoken, written, or signed"
    assert dataset.entity_labels is None
    assert str(dataset) == "CoDEx(name='s')"

    # Reload from the processed files: the same names and labels.
    again = CoDEx(str(codex_s_root), name="s", log=False)
    assert again.entity_names == dataset.entity_names
    assert again.relation_names == dataset.relation_names
    assert again.relation_labels == dataset.relation_labels
    assert torch.equal(again[0].edge_index, data.edge_index)


def test_codex_s_views(codex_s_root, monkeypatch):
    # Reference figures of the research code's own CoDEx-S run.
    monkeypatch.setattr(base, "download_url", no_download)
    data = CoDEx(str(codex_s_root), name="s", log=False)[0]
    stats = dataset_statistics(data, beta=0.2)
    assert stats["rf_constraints"] == 71756
    assert stats["rf_pairs"] == 1638
    assert stats["rf_pairs_kept"] == 330
    assert stats["rf_cutoff"] == 47
    assert stats["rf_constraints_kept"] == 59744
    assert stats["rf_relation_entity_undirected_edges"] == 20630
    assert stats["ef_undirected_edges"] == 30076
    assert (stats["entities"], stats["relations"], stats["train"], stats["valid"], stats["test"]) == TABLE1["codex-s"]

    transform = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=0.2), LeviGraphTransform()])
    data = transform(data)
    for key, num_nodes in [
        ("ef_edge_index", data.num_nodes),
        ("rf_edge_index", data.rf_num_nodes),
        ("levi_edge_index", data.levi_num_nodes),
    ]:
        edge_index = data[key]
        n = num_nodes
        key_fw = edge_index[0] * n + edge_index[1]
        key_bw = edge_index[1] * n + edge_index[0]
        assert torch.equal(key_fw.sort().values, key_bw.sort().values), key
        assert bool((edge_index[0] != edge_index[1]).all()), key
        assert key_fw.unique().numel() == key_fw.numel(), key
        assert int(edge_index.max()) < n
    assert data.ef_edge_index.size(1) == 2 * 30076
    assert data.rf_num_nodes == 2034 + 2 * 42
    # the default view: the r-e edges alone; with relation_edges=True also one r-r edge per kept unordered pair
    assert data.rf_edge_index.size(1) == 2 * 20630
    with_rr = RelationFocusedTransform(beta=0.2, relation_edges=True)(data.clone())
    assert with_rr.rf_edge_index.size(1) == 2 * (20630 + stats["rf_relation_relation_undirected_edges"])


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("codex-m", marks=pytest.mark.slow),  # processing 185k triples
        "litwd1k",
        pytest.param("fb15k-237", marks=pytest.mark.slow),
    ],
)
def test_table1_counts(name, shared_datasets, tmp_path, monkeypatch):
    monkeypatch.setattr(base, "download_url", no_download)
    copy_raw(shared_datasets, name, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = get_dataset(name, str(tmp_path), log=False)
    data = dataset[0]
    assert counts(data) == TABLE1[name]
    messages = [str(w.message) for w in caught if "does not occur in training" in str(w.message)]
    if name == "fb15k-237":
        # 36 of the 14,541 entities occur only in valid (9 triples) or test
        # (28 triples); they are kept, by benchmark convention.
        assert len(messages) == 2
        assert "9 of 17535" in messages[0] and "28 of 20466" in messages[1]
        assert int(torch.unique(data.edge_index[:, data.train_mask]).numel()) == 14505
        assert dataset.entity_labels is None
    else:
        assert messages == []
    if name == "codex-m":
        stats = dataset_statistics(data, beta=0.2)
        assert (stats["rf_constraints"], stats["rf_pairs"], stats["rf_pairs_kept"], stats["rf_constraints_kept"]) == (
            601980,
            2970,
            594,
            548888,
        )
    if name == "litwd1k":
        assert dataset.entity_labels[dataset.entity_names.index("Q1000")] == "Gabon"
        assert dataset.relation_labels[dataset.relation_names.index("P17")] == "country"


@pytest.mark.slow  # processing 310k triples twice
def test_fb15k237_is_pygs_fb15k_237_splits_combined(shared_datasets, tmp_path, monkeypatch):
    monkeypatch.setattr(base, "download_url", no_download)
    monkeypatch.setattr(pyg_freebase, "download_url", no_download)
    copy_raw(shared_datasets, "fb15k-237", tmp_path / "ours")
    (tmp_path / "pyg" / "raw").mkdir(parents=True)
    for name in ("train.txt", "valid.txt", "test.txt"):
        shutil.copyfile(shared_datasets / "fb15k-237" / name, tmp_path / "pyg" / "raw" / name)
    splits = [pyg_freebase.FB15k_237(str(tmp_path / "pyg"), split=split) for split in ("train", "val", "test")]
    expected = combine_splits(*splits)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "(?s).*does not occur in training")  # 9 valid and 28 test triples
        data = FB15k237(str(tmp_path / "ours"), log=False)[0]
    for key in ("edge_index", "edge_type", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(data[key], expected[key]), key
    assert (data.num_nodes, data.num_relations) == (expected.num_nodes, expected.num_relations) == (14541, 237)
    assert FB15k237.urls["train.txt"] == f"{pyg_freebase.FB15k_237.url}/train.txt"


def test_pre_transform_change_reprocesses(codex_s_root, monkeypatch):
    monkeypatch.setattr(base, "download_url", no_download)
    a = CoDEx(str(codex_s_root), "s", log=False, pre_transform=RelationFocusedTransform(beta=0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PyG "pre_transform differs"
        b = CoDEx(str(codex_s_root), "s", log=False, pre_transform=RelationFocusedTransform(beta=1.0))
    assert str(a.pre_transform) != str(b.pre_transform)
    assert a.processed_dir != b.processed_dir
    assert b[0].rf_edge_index.size(1) > a[0].rf_edge_index.size(1)
    # Going back finds the first processed copy again.
    c = CoDEx(str(codex_s_root), "s", log=False, pre_transform=RelationFocusedTransform(beta=0.2))
    assert torch.equal(c[0].rf_edge_index, a[0].rf_edge_index)


# Downloads (no network: download_url is replaced) -------------------------


def fake_download(shared: Path, folder: str, fail=(), wrong=()):
    calls = []

    def download_url(url, folder_, log=True, filename=None):
        calls.append(url)
        name = filename or url.rpartition("/")[2]
        path = os.path.join(folder_, name)
        # the dataset downloads to '.<name>.tmp-download' and renames
        name = name.lstrip(".").split(TEMP_INFIX)[0]
        if any(f in url for f in fail):
            raise urllib.error.URLError("no network in tests")
        os.makedirs(folder_, exist_ok=True)
        source = shared / folder / name
        if any(w in url for w in wrong) or not source.exists():
            Path(path).write_text("a\tb\tc\n")
        else:
            shutil.copyfile(source, path)
        return path

    return download_url, calls


def test_download(shared_datasets, tmp_path, monkeypatch):
    download, calls = fake_download(shared_datasets, "codex-s", fail=["entities.json"])
    monkeypatch.setattr(base, "download_url", download)
    with pytest.warns(UserWarning, match="entities.en.json"):
        dataset = CoDEx(str(tmp_path), name="s", log=False)
    assert counts(dataset[0]) == TABLE1["codex-s"]
    assert any(url.endswith("codex-s/train.txt") for url in calls)
    assert dataset.relation_labels is not None  # relations.json "downloaded"
    assert dataset.entity_labels is None
    assert sorted(os.listdir(tmp_path / "codex-s" / "raw")) == [
        "relations.en.json",
        "test.txt",
        "train.txt",
        "valid.txt",
    ]


def test_download_failure_names_url_and_folder(tmp_path, monkeypatch):
    download, _ = fake_download(Path("/nonexistent"), "x", fail=["valid.txt"])
    monkeypatch.setattr(base, "download_url", download)
    with pytest.raises(DownloadError) as info:
        CoDEx(str(tmp_path), name="l", log=False)  # no md5 to trip first
    message = str(info.value)
    assert ("https://raw.githubusercontent.com/tsafavi/codex/master/data/triples/codex-l/valid.txt") in message
    assert str(tmp_path / "codex-l" / "raw") in message
    assert "by hand" in message


def test_md5_mismatch(shared_datasets, tmp_path, monkeypatch):
    download, _ = fake_download(shared_datasets, "fb15k-237", wrong=["test.txt"])
    monkeypatch.setattr(base, "download_url", download)
    with pytest.raises(DownloadError, match="md5") as info:
        FB15k237(str(tmp_path), log=False)
    raw = tmp_path / "fb15k-237" / "raw"
    assert "FB15k-237/test.txt" in str(info.value)
    assert str(raw) in str(info.value)
    assert not (raw / "test.txt").exists()  # the bad file is removed
    assert (raw / "train.txt").exists()  # good ones stay


def test_no_md5_for_codex_l(tmp_path, monkeypatch):
    # CoDEx-L has no known md5: any content passes the download step.
    download, _ = fake_download(Path("/nonexistent"), "x", fail=["json"])
    monkeypatch.setattr(base, "download_url", download)
    with pytest.warns(UserWarning, match="labels"):
        dataset = CoDEx(str(tmp_path), name="l", log=False)
    assert dataset[0].num_nodes == 2  # the fake 'a b c' files


# Names and registry ---------------------------------------------------------


def test_bad_names(tmp_path):
    with pytest.raises(ValueError, match="'x'"):
        CoDEx(str(tmp_path), name="x")
    with pytest.raises(ValueError, match="1k"):
        LitWD(str(tmp_path), name="2k")
    with pytest.raises(ValueError, match="unseen"):
        CoDEx(str(tmp_path), name="s", unseen="ignore")
    assert list(tmp_path.iterdir()) == []  # rejected before any download
    with pytest.raises(ValueError) as info:
        get_dataset("wn18rr", str(tmp_path))
    for name in ["codex-s", "codex-m", "codex-l", "litwd1k", "litwd19k", "litwd48k", "fb15k-237", "folder"]:
        assert name in str(info.value)


def test_registry(codex_s_root, write_folder, monkeypatch):
    monkeypatch.setattr(base, "download_url", no_download)
    assert set(DATASETS) == {"codex-s", "codex-m", "codex-l", "litwd1k", "litwd19k", "litwd48k", "fb15k-237", "folder"}
    dataset = get_dataset("CoDEx-S", str(codex_s_root), log=False)
    assert isinstance(dataset, CoDEx) and dataset.name == "s"
    folder = write_folder("a\tr\tb\nb\tr\tc\n")
    assert isinstance(get_dataset("folder", str(folder), log=False), TriplesFolder)
    assert isinstance(get_dataset(str(folder), log=False), TriplesFolder)
    with pytest.raises(ValueError, match="root"):
        get_dataset("codex-s")


# Parsing --------------------------------------------------------------------


def test_ids_first_appearance_and_opaque_names(write_folder):
    folder = write_folder("007\tP01\t7\n7\tP1\t007\n0x\tP01\t7\n", valid="7\tP01\tnew\n", test="new\tP9\t007\n")
    with pytest.warns(UserWarning, match="kept"):
        dataset = TriplesFolder(str(folder), log=False)
    assert dataset.entity_names == ["007", "7", "0x", "new"]
    assert dataset.relation_names == ["P01", "P1", "P9"]
    data = dataset[0]
    assert data.edge_index.tolist() == [[0, 1, 2, 1, 3], [1, 0, 1, 3, 0]]
    assert data.edge_type.tolist() == [0, 1, 0, 0, 2]
    assert data.train_mask.tolist() == [True, True, True, False, False]
    assert data.val_mask.tolist() == [False, False, False, True, False]
    assert data.test_mask.tolist() == [False, False, False, False, True]
    assert dataset.entity_labels is None and dataset.relation_labels is None
    assert dataset.labelled_relation_names == ["P01", "P1", "P9"]  # no labels: the identifiers
    assert str(dataset) == f"TriplesFolder({str(folder)!r})"


def test_crlf_and_blank_lines(write_folder):
    folder = write_folder("a\tr\tb\r\n\r\nb\tr\tc\r\n\n")
    data = TriplesFolder(str(folder), log=False)
    assert data.entity_names == ["a", "b", "c"]
    assert int(data[0].train_mask.sum()) == 2


@pytest.mark.parametrize(
    "bad,lineno",
    [
        ("a\tr\n", 2),  # two fields
        ("a\tr\tb\tc\n", 2),  # four fields
        ("a r b\n", 2),  # spaces, not tabs
        ("a\t\tb\n", 2),  # empty relation
    ],
)
def test_malformed_line(write_folder, bad, lineno):
    folder = write_folder("x\tr\ty\n" + bad + "y\tr\tx\n")
    with pytest.raises(ValueError) as info:
        TriplesFolder(str(folder), log=False)
    assert "train.txt" in str(info.value)
    assert f"line {lineno}" in str(info.value)


def test_malformed_line_number_counts_blank_lines(write_folder):
    folder = write_folder("a\tr\tb\n", test="\n\na\tr\tb\nbad line\n")
    with pytest.raises(ValueError, match=r"test\.txt, line 4"):
        TriplesFolder(str(folder), log=False)


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_empty_split(write_folder, text):
    folder = write_folder("a\tr\tb\n", valid=text)
    with pytest.raises(ValueError, match=r"valid\.txt.*no triples"):
        TriplesFolder(str(folder), log=False)


def test_duplicates_dropped(write_folder):
    folder = write_folder("a\tr\tb\nb\tr\tc\na\tr\tb\na\tr\tb\n", valid="a\tr\tc\na\tr\tc\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = TriplesFolder(str(folder), log=False)
    messages = sorted(str(w.message) for w in caught)
    assert "train.txt: dropped 2 repeated" in messages[0]
    assert "valid.txt: dropped 1 repeated" in messages[1]
    data = dataset[0]
    assert data.edge_index.tolist() == [[0, 1, 0, 1], [1, 2, 2, 0]]
    assert data.train_mask.tolist() == [True, True, False, False]
    assert dataset.num_dropped["train.txt:duplicate"] == 2
    assert dataset.num_dropped["valid.txt:duplicate"] == 1


UNSEEN = dict(train="a\tr\tb\nb\tr\tc\n", valid="a\tr\tc\nc\tr\tz\n", test="a\ts\tb\nb\tr\ta\n")


def test_unseen_keep(write_folder):
    folder = write_folder(**UNSEEN)
    with pytest.warns(UserWarning, match="1 of 2"):
        dataset = TriplesFolder(str(folder), log=False)
    assert dataset.entity_names == ["a", "b", "c", "z"]
    assert dataset.relation_names == ["r", "s"]
    assert counts(dataset[0]) == (4, 2, 2, 2, 2)


def test_unseen_drop(write_folder):
    folder = write_folder(**UNSEEN)
    with pytest.warns(UserWarning, match="dropped 1 of 2"):
        dataset = TriplesFolder(str(folder), log=False, unseen="drop")
    assert dataset.entity_names == ["a", "b", "c"]
    assert dataset.relation_names == ["r"]
    assert counts(dataset[0]) == (3, 1, 2, 1, 1)
    assert dataset.num_dropped["valid.txt:unseen"] == 1
    assert dataset.num_dropped["test.txt:unseen"] == 1


def test_unseen_error(write_folder):
    folder = write_folder(**UNSEEN)
    with pytest.raises(ValueError, match=r"valid\.txt, line 2"):
        TriplesFolder(str(folder), log=False, unseen="error")


def test_folder_missing_file(tmp_path):
    (tmp_path / "train.txt").write_text("a\tr\tb\n")
    (tmp_path / "valid.txt").write_text("a\tr\tb\n")
    with pytest.raises(FileNotFoundError, match="test.txt"):
        TriplesFolder(str(tmp_path), log=False)


def test_folder_labels(write_folder):
    folder = write_folder(
        "a\tr\tb\n", entity_labels__txt="a\tAlpha\nb\tBeta\n", relation_labels__txt="r\trel r\nignored line\n"
    )
    dataset = TriplesFolder(str(folder), log=False)
    assert dataset.entity_labels == ["Alpha", "Beta"]
    assert dataset.relation_labels == ["rel r"]
    assert dataset.labelled_relation_names == ["r (rel r)"]


def test_another_layout_of_the_stored_views_reprocesses(codex_s_root, monkeypatch):
    # a cache written in another layout of the views is never read: the folder holds the layout's version
    monkeypatch.setattr(base, "download_url", no_download)
    transform = RelationFocusedTransform(beta=0.2)
    folder_now = CoDEx(str(codex_s_root), "s", log=False, pre_transform=transform).processed_dir
    monkeypatch.setattr(base, "STORAGE_VERSION", base.STORAGE_VERSION - 1)
    before = CoDEx(str(codex_s_root), "s", log=False, pre_transform=transform)
    assert before.processed_dir != folder_now and os.path.isdir(before.processed_dir)


def test_an_identifier_with_a_trailing_space_is_kept_but_said(write_folder):
    folder = write_folder(train="a\tr\tb\nb \tr\tc\nb\tr\t c\n", valid="a\tr\tc\n", test="a\tr\tb\n")
    with pytest.warns(UserWarning, match=r"train.txt, line 2: an identifier begins or ends with a space \(2 such"):
        dataset = TriplesFolder(str(folder), log=False)
    assert dataset.entity_names == ["a", "b", "b ", "c", " c"]  # opaque: kept as written


def test_an_unreadable_folder_is_not_reported_as_missing_files(write_folder, monkeypatch):
    folder = write_folder(train="a\tr\tb\n", valid="a\tr\tb\n", test="a\tr\tb\n")
    (folder / "test.txt").unlink()  # what an unreadable folder looks like to a file check
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(folder) and real_access(path, mode))
    with pytest.raises(PermissionError, match="folder not readable") as error:
        TriplesFolder(str(folder), log=False)
    assert error.value.filename == str(folder)
