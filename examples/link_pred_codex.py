"""Link prediction on CoDEx with WGE, assembled from torch_wge's PyG building blocks.

The knowledge graph is a PyG dataset, its two graph views are PyG transforms,
and the model is embeddings, a two-view GNN encoder and one QuatE decoder per
layer; training is an explicit loop of 1-N queries, evaluation ranks every
entity for each test triple in both directions (filtered). Hyper-parameters
come from a recipe (``--recipe``, as ``torch-wge train --recipe``, see
docs/recipes.md); any option given explicitly overrides it:

    python examples/link_pred_codex.py                       # CoDEx-S, the fast recipe: 500 epochs
    python examples/link_pred_codex.py --recipe paper        # the paper's 3000 epochs
    python examples/link_pred_codex.py --dataset codex-m --epochs 50 --save runs/example.pt

``--dataset`` takes the names ``torch-wge train`` takes; the raw files are
downloaded to ``--root`` (default ``data``) unless already there (docs/data.md
says where to place them by hand). The model size ``--hidden-channels``
counts quaternions (each embedding holds four times as many real numbers).
Training runs on ``--device``, by default CUDA when available, with
``--threads`` CPU threads, by default as ``torch-wge train`` chooses them
(PyTorch's default, at most the CPUs this process may run on). For
checkpoints, resuming, a time limit or several processes use
``torch-wge train``, the full trainer; it trains the same model the same way.
"""

import argparse
import os
import sys
import time

import torch
import torch_geometric.transforms as T

from torch_wge.cli import OneLineParser, positive_int
from torch_wge.data import kg_triples
from torch_wge.datasets import DATASETS, DownloadError, get_dataset
from torch_wge.distributed import resolve_device
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.io import torch_save
from torch_wge.training import RECIPES, TrainConfig, TrainingQueries, build_loss, build_model
from torch_wge.training.threads import set_threads
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

NAMED_DATASETS = [name for name in DATASETS if name != "folder"]

parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--dataset", default="codex-s", choices=NAMED_DATASETS, help="dataset (default: codex-s)")
parser.add_argument("--root", default="data", help="dataset folder (default: data)")
parser.add_argument("--recipe", default=TrainConfig().recipe, choices=sorted(RECIPES), help="training recipe")
parser.add_argument("--epochs", type=int, help="default: the recipe's")
parser.add_argument("--lr", type=float, help="peak learning rate (default: the recipe's)")
parser.add_argument("--hidden-channels", type=int, help="quaternions per embedding (default: 64)")
parser.add_argument("--num-layers", type=int, help="encoder layers K; 0 is QuatE (default: 2)")
parser.add_argument("--beta", type=float, help="relation-focused view threshold (default: 0.2)")
parser.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
parser.add_argument("--threads", type=positive_int, help="CPU threads (default: as torch-wge train chooses them)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--save", help="write the best model's weights here (atomically)")
args = parser.parse_args()
given = {"epochs": args.epochs, "lr": args.lr, "hidden_channels": args.hidden_channels, "num_layers": args.num_layers}
given["beta"] = args.beta
try:  # the recipe's settings, each overridden by an option given explicitly
    config = TrainConfig(recipe=args.recipe, seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    config.validate()
    device = resolve_device(args.device)
    threads = set_threads(args.threads)
except ValueError as error:
    parser.error(str(error))
if args.save and not os.path.isdir(os.path.dirname(os.path.abspath(args.save))):
    parser.error(f"--save {args.save}: its folder does not exist")  # found now, not after training


def main() -> None:
    print(f"{parser.prog}: {threads} CPU thread(s) (--threads to change)", file=sys.stderr)
    torch.manual_seed(args.seed)

    # 1. The dataset: one Data with edge_index (head, tail), edge_type and
    #    train/val/test masks; the views are built once and stored with it.
    views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=config.beta)])
    data = get_dataset(args.dataset, args.root, pre_transform=views)[0]
    num_entities, num_relations = data.num_nodes, data.num_relations
    print(
        f"{args.dataset}: {num_entities:,} entities, {num_relations:,} relations; undirected edges (each direction "
        f"an edge_index column): {data.ef_edge_index.size(1) // 2:,} entity-focused, "
        f"{data.rf_edge_index.size(1) // 2:,} relation-focused"
    )

    # 2. The model: entity and relation embeddings -> TwoViewEncoder (K
    #    TwoViewConv layers over both views) -> a QuatEDecoder per layer, scores
    #    weighted by alpha_k. graph_inputs turns the views into CSR adjacencies.
    #    build_model maps the settings to WGE(num_entities, num_relations,
    #    hidden_channels=..., num_layers=..., dropout=..., ...), build_loss to the
    #    training objective OneToNLoss(objective=..., label_smoothing=..., ...).
    model = build_model(config, data).to(device)
    loss_fn = build_loss(config)
    graph = {name: adj.to(device) for name, adj in model.graph_inputs(data).items()}
    # AdamW's decoupled weight decay (the fast recipe's 0.1); with 0 it is Adam. Its fused step is
    # several times faster than the default one on the CPU and one kernel launch on a GPU.
    fused = True if device.type in ("cpu", "cuda") else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=fused)

    # 3. Training queries (h, r, ?) with their true tails, inverse relations
    #    r + R included; evaluators rank each triple's answer among all entities.
    queries = TrainingQueries(kg_triples(data, "train"), num_entities, num_relations)
    evaluators = {split: LinkPredictionEvaluator.from_data(data, split) for split in ("valid", "test")}
    shuffle = torch.Generator().manual_seed(args.seed)

    def train_epoch(epoch: int) -> float:
        model.train()
        for group in optimizer.param_groups:  # warm-up and cosine decay, or constant
            group["lr"] = config.learning_rate(epoch)
        total = torch.zeros((), device=device)  # summed on the device: loss.item() would wait for a GPU
        for index in queries.batch_indices(config.batch_size, shuffle):
            heads, relations, positives = (t.to(device) for t in queries.batch(index))
            encoded = model.encode(**graph)  # the whole graph, every layer
            # 1-N against all entities (or sampled ones); loss_fn.triples takes (head, relation, tail) triples
            loss = loss_fn(model, encoded, heads, relations, positives)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            total += loss.detach()
        return total.item() / queries.num_batches(config.batch_size)

    @torch.no_grad()
    def evaluate(split: str):
        model.eval()
        encoded = model.encode(**graph)  # once, then every query is scored against all entities
        score_fn = lambda entities, relations: model.score_all(encoded, entities, relations)  # noqa: E731
        return evaluators[split].evaluate(score_fn, device=device)

    # 4. Train, validate every eval_every epochs, keep the best weights.
    best_mrr, best_epoch, best_weights = -1.0, 0, None
    for epoch in range(config.epochs):
        start = time.perf_counter()
        loss = train_epoch(epoch)
        progress = f"epoch {epoch + 1:4d}/{config.epochs}  loss {loss:.5f}  {time.perf_counter() - start:.1f} s"
        if (epoch + 1) % config.eval_every == 0 or epoch + 1 == config.epochs:
            mrr = evaluate("valid")["both.mrr"]
            if mrr > best_mrr:
                best_mrr, best_epoch = mrr, epoch + 1
                best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            progress += f"  valid MRR {mrr:.4f} (best {best_mrr:.4f} at {best_epoch})"
        print(progress, flush=True)

    # 5. The test split with the best validation weights.
    model.load_state_dict(best_weights)
    test = evaluate("test")
    print(
        f"best validation MRR {best_mrr:.4f} at epoch {best_epoch}; test (filtered, both directions): "
        f"MRR {test['both.mrr']:.4f} | H@1 {test['both.hits@1']:.4f} | H@3 {test['both.hits@3']:.4f} | "
        f"H@10 {test['both.hits@10']:.4f}"
    )
    if args.save:
        torch_save(best_weights, args.save)
        print(f"best weights written to {args.save}")


try:
    main()
except KeyboardInterrupt:
    print(f"{parser.prog}: interrupted; nothing was written", file=sys.stderr)
    raise SystemExit(130)
except (DownloadError, OSError) as error:  # offline without the raw files, an unwritable --save, ...
    print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
    raise SystemExit(2)
