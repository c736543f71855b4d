from pathlib import Path
from typing import Dict, Optional, Union

from torch_geometric.data import Data


def write_triples_folder(
    data: Data,
    folder: Union[str, Path],
    entity_labels: Optional[Dict[int, str]] = None,
    relation_labels: Optional[Dict[int, str]] = None,
) -> Path:
    """Writes the graph ``data`` (of :func:`random_kg`) as a folder of triple files
    that :class:`~torch_wge.datasets.TriplesFolder` reads: ``train.txt``,
    ``valid.txt`` and ``test.txt`` with entities named ``e000, e001, ...`` and
    relations ``P0, P1, ...``, and the label files of ``entity_labels`` and
    ``relation_labels`` (id -> label) when given. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for split, mask in (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)):
        triples = zip(data.edge_index.t()[mask].tolist(), data.edge_type[mask].tolist())
        (folder / f"{split}.txt").write_text("".join(f"e{h:03d}\tP{r}\te{t:03d}\n" for (h, t), r in triples))
    if entity_labels is not None:
        (folder / "entity_labels.txt").write_text("".join(f"e{i:03d}\t{s}\n" for i, s in entity_labels.items()))
    if relation_labels is not None:
        (folder / "relation_labels.txt").write_text("".join(f"P{i}\t{s}\n" for i, s in relation_labels.items()))
    return folder
