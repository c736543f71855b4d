"""Link prediction with WGE: a PyG dataset with its two graph views as transforms, the WGE model,
a plain loop over batches of 1-N queries, filtered ranking of the validation and test triples.
The settings are the fast recipe of `torch-wge train`, which trains the same model the same way
and adds checkpoints, resuming and logs. Named datasets are downloaded
to --root (docs/data.md: placing the files by hand); a folder of triples is read where it is:

    python examples/link_pred_codex.py                           # CoDEx-S, 500 epochs
    python examples/link_pred_codex.py --dataset codex-m --epochs 50 --save runs/example.pt
    python examples/link_pred_codex.py --dataset path/to/my_kg   # train.txt, valid.txt, test.txt
"""

import argparse
import math
import os
import sys
import time

import torch
import torch_geometric.transforms as T

from torch_wge.data import TrainingQueries, kg_triples
from torch_wge.datasets import DATASETS, DownloadError, get_dataset
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.nn import WGE, OneToNLoss, auto_matmul_dtype
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

# The fast recipe (docs/recipes.md; tests/test_example.py checks that the two agree).
HIDDEN_CHANNELS = 64  # quaternions per embedding (256 real numbers)
NUM_LAYERS = 2  # encoder layers K
ALPHA0 = 0.9  # weight of layer 0's scores; every other layer's is (1 - ALPHA0) / K
BETA = 0.2  # fraction of relation pairs whose constraints the relation-focused view keeps
DROPOUT = 0.5  # on each decoder's query, after its batch norm
OBJECTIVE, LABEL_SMOOTHING = "softmax", 0.1  # 1-vs-all cross-entropy against all entities
LR, WEIGHT_DECAY = 1e-2, 0.1  # AdamW's peak learning rate and decoupled weight decay
WARMUP_EPOCHS = 5  # linear warm-up, then a cosine decay to 0 at the last epoch
BATCH_SIZE, GRAD_CLIP = 1024, 0.5  # (head, relation) queries per step; gradient-norm clipping
EPOCHS, EVAL_EVERY, EVAL_BATCH_SIZE = 500, 10, 1024


def learning_rate(epoch: int, epochs: int) -> float:
    """The learning rate of ``epoch`` (from 0)."""
    if epoch < WARMUP_EPOCHS:
        return LR * (epoch + 1) / WARMUP_EPOCHS
    return LR * 0.5 * (1.0 + math.cos(math.pi * ((epoch - WARMUP_EPOCHS) / max(epochs - WARMUP_EPOCHS, 1))))


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
names = ", ".join(name for name in DATASETS if name != "folder")
parser.add_argument("--dataset", default="codex-s", help=f"{names} or a folder of triples (default: codex-s)")
parser.add_argument("--root", default="data", help="downloaded and processed datasets (default: data)")
parser.add_argument("--epochs", type=int, default=EPOCHS, help=f"(default: {EPOCHS})")
parser.add_argument("--seed", type=int, default=0, help="(default: 0)")
cuda = ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))] if torch.cuda.is_available() else []
parser.add_argument("--device", choices=["cpu", *cuda], default=(cuda or ["cpu"])[0], help="(default: %(default)s)")
parser.add_argument("--save", metavar="PATH", help="write the best validation epoch's weights here")


def fail(error: Exception):
    print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
    raise SystemExit(2)


def main(args: argparse.Namespace) -> None:
    start, device = time.perf_counter(), torch.device(args.device)
    # 1. The dataset: one Data with edge_index (head, tail), edge_type and train/val/test masks,
    #    and its two graph views, built once (pre_transform) and stored with it.
    views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=BETA)])
    # a named dataset lies in --root (downloaded there); a folder's processed graph is kept under --root
    where = {"root": args.root} if args.dataset.lower() in DATASETS else {"cache_root": args.root}
    try:
        data = get_dataset(args.dataset, **where, pre_transform=views)[0]
    except ValueError as error:  # an unknown name, a malformed triple file
        fail(error)
    num_entities, num_relations = data.num_nodes, data.num_relations
    print(f"{args.dataset}: {num_entities:,} entities, {num_relations:,} relations, {data.num_edges:,} triples")
    # bfloat16 matmuls where the device has them in hardware (as `torch-wge train`'s default)
    matmul_dtype = auto_matmul_dtype(device)
    print(f"matmuls in {matmul_dtype or torch.float32} on {device}, {torch.get_num_threads()} CPU thread(s)")

    # 2. The model, its objective and optimiser; graph_inputs: the views as CSR adjacencies.
    torch.manual_seed(args.seed)  # the initial weights and dropout masks of `torch-wge train --seed`
    model = WGE(num_entities, num_relations, hidden_channels=HIDDEN_CHANNELS, num_layers=NUM_LAYERS,
                alpha0=ALPHA0, dropout=DROPOUT, batch_norm=True, cached=True, matmul_dtype=matmul_dtype).to(device)  # fmt: skip
    # cached=True, as GCNConv's: the views are normalised once, for this one graph (transductive)
    graph = {name: adj.to(device) for name, adj in model.graph_inputs(data).items()}
    loss_fn = OneToNLoss(objective=OBJECTIVE, label_smoothing=LABEL_SMOOTHING, matmul_dtype=matmul_dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, fused=True)

    # 3. The 1-N training queries: each distinct (head, relation), inverse relations r + R
    #    included, with all its true tails. The evaluators filter ranks by all known triples.
    queries = TrainingQueries(kg_triples(data, "train"), num_entities, num_relations)
    evaluators = {split: LinkPredictionEvaluator.from_data(data, split) for split in ("valid", "test")}
    shuffle = torch.Generator().manual_seed(args.seed)

    def train_epoch(epoch: int) -> float:
        model.train()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(epoch, args.epochs)
        total, steps = torch.zeros((), device=device), queries.num_batches(BATCH_SIZE)
        for step, batch in enumerate(queries.batches(BATCH_SIZE, shuffle)):
            heads, relations, positives = (t.to(device) for t in batch)  # positives: (row in batch, tail)
            encoded = model.encode(**graph)  # the whole graph, every layer, each step
            loss = loss_fn(model, encoded, heads, relations, positives)  # against all entities
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP, foreach=True)
            optimizer.step()
            total += loss.detach()
            if epoch == 0 and step == 0:
                after_first = time.perf_counter()
            elif epoch == 0 and step == 3 and (estimate := (time.perf_counter() - after_first) / 3 * steps) > 300:
                print(f"an epoch takes about {estimate / 60:.0f} min here: try fewer --epochs, a smaller "
                      "HIDDEN_CHANNELS or `torch-wge train --recipe large`", file=sys.stderr)  # fmt: skip
        return total.item() / steps

    @torch.no_grad()
    def evaluate(split: str):
        model.eval()
        encoded = model.encode(**graph)  # once, then each query is scored against all entities
        score_fn = lambda entities, relations: model.score_all(encoded, entities, relations)
        return evaluators[split].evaluate(score_fn, batch_size=EVAL_BATCH_SIZE, device=device)

    # 4. Train; validate every EVAL_EVERY epochs and after the last; keep the best weights.
    best_mrr, best_epoch, best_weights, training = -1.0, 0, None, time.perf_counter()
    for epoch in range(args.epochs):
        tic = time.perf_counter()
        loss = train_epoch(epoch)
        line = f"epoch {epoch + 1:4d}/{args.epochs}  loss {loss:.5f}  {time.perf_counter() - tic:.1f} s"
        if (epoch + 1) % EVAL_EVERY == 0 or epoch + 1 == args.epochs:
            mrr = evaluate("valid")["both.mrr"]
            if mrr > best_mrr:
                best_mrr, best_epoch = mrr, epoch + 1
                best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            line += f"  valid MRR {mrr:.4f} (best {best_mrr:.4f} at {best_epoch})"
        eta = (time.perf_counter() - training) / (epoch + 1) * (args.epochs - epoch - 1)
        print(f"{line}  ETA {eta / 60:.1f} min", flush=True)

    # 5. The test split with the best validation weights.
    model.load_state_dict(best_weights)
    print(f"best validation MRR {best_mrr:.4f} at epoch {best_epoch}; test: {evaluate('test').summary_line()}")
    if args.save:  # atomically: to a temporary file in the same folder, then renamed
        temporary = f"{args.save}.tmp-{os.getpid()}"
        try:
            torch.save(best_weights, temporary)
            os.replace(temporary, args.save)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
        print(f"best weights written to {args.save}")
    print(f"total time {(time.perf_counter() - start) / 60:.1f} min")


if __name__ == "__main__":
    args = parser.parse_args()
    if not (1 <= args.epochs < 2**63 and 0 <= args.seed < 2**63):
        parser.error(f"--epochs must be in [1, 2**63) and --seed in [0, 2**63), got {args.epochs} and {args.seed}")
    if args.save and not os.path.isdir(os.path.dirname(os.path.abspath(args.save))):
        parser.error(f"argument --save: the folder of {args.save} does not exist")  # found now, not after training
    try:
        main(args)
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted; nothing was written", file=sys.stderr)
        raise SystemExit(130)
    except (DownloadError, OSError) as error:  # offline without the raw files, an unwritable --save, ...
        fail(error)
