"""Link prediction on CoDEx with WGE, assembled from torch_wge's PyG building blocks.

The knowledge graph is a PyG dataset, its two graph views are PyG transforms,
and the model is embeddings, a two-view GNN encoder and one QuatE decoder per
layer; training is an explicit loop of 1-N queries, evaluation ranks every
entity for each test triple in both directions (filtered). Hyper-parameters
come from a recipe (``--recipe``, see docs/recipes.md); any option
given explicitly overrides it:

    python examples/link_pred_codex.py                     # CoDEx-S, the fast recipe: 500 epochs
    python examples/link_pred_codex.py --recipe paper      # the paper's 3000 epochs
    python examples/link_pred_codex.py --epochs 50 --save runs/example.pt

The raw files are downloaded to ``--root`` (default ``data``) unless already
there (docs/data.md says where to place them by hand). For runs with
checkpoints, ``--resume``, a time limit or several processes use
``torch-wge train``, the full trainer; it trains the same model the same way.
"""

import argparse
import time

import torch
import torch_geometric.transforms as T

from torch_wge.cli import run_reporting_errors
from torch_wge.datasets import CoDEx
from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.io import torch_save
from torch_wge.nn import WGE
from torch_wge.training import RECIPES, TrainConfig
from torch_wge.training.data import split_triples
from torch_wge.training.queries import TrainingQueries
from torch_wge.transforms import EntityFocusedTransform, RelationFocusedTransform

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--dataset", default="s", choices=["s", "m", "l"], help="CoDEx size (default: s)")
parser.add_argument("--root", default="data", help="dataset folder (default: data)")
parser.add_argument("--recipe", default=TrainConfig().recipe, choices=sorted(RECIPES), help="training recipe")
parser.add_argument("--epochs", type=int, help="default: the recipe's")
parser.add_argument("--lr", type=float, help="peak learning rate (default: the recipe's)")
parser.add_argument("--hidden-channels", type=int, default=64, help="quaternions per embedding (default: 64)")
parser.add_argument("--num-layers", type=int, default=2, help="encoder layers K; 0 is QuatE (default: 2)")
parser.add_argument("--beta", type=float, default=0.2, help="relation-focused view threshold (default: 0.2)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--save", help="write the best model's weights here (atomically)")
parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
args = parser.parse_args()
try:  # the recipe's settings, each overridden by an option given explicitly
    config = TrainConfig(recipe=args.recipe, epochs=args.epochs, lr=args.lr, beta=args.beta, seed=args.seed)
    config.validate()
except ValueError as error:
    parser.error(str(error))


def main() -> None:
    torch.manual_seed(args.seed)

    # 1. The dataset: one Data with edge_index (head, tail), edge_type and
    #    train/val/test masks; the views are built once and stored with it.
    views = T.Compose([EntityFocusedTransform(), RelationFocusedTransform(beta=args.beta)])
    data = CoDEx(args.root, name=args.dataset, pre_transform=views)[0]
    num_entities, num_relations = data.num_nodes, data.num_relations
    print(
        f"CoDEx-{args.dataset.upper()}: {num_entities} entities, {num_relations} relations, "
        f"{data.ef_edge_index.size(1)} entity-focused and {data.rf_edge_index.size(1)} relation-focused edges"
    )

    # 2. The model: entity and relation embeddings -> TwoViewEncoder (K
    #    TwoViewConv layers over both views) -> a QuatEDecoder per layer, scores
    #    weighted by alpha_k. graph_inputs turns the views into CSR adjacencies.
    model = WGE(
        num_entities,
        num_relations,
        hidden_channels=args.hidden_channels,
        num_layers=args.num_layers,
        dropout=config.dropout,
        objective=config.objective,
        label_smoothing=config.label_smoothing,
        num_candidates=config.candidates or None,  # the large recipe's sampled softmax; 0: all entities
    )
    graph = model.graph_inputs(data)
    # AdamW's decoupled weight decay (the fast recipe's 0.1); with 0 it is Adam
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    # 3. Training queries (h, r, ?) with their true tails, inverse relations
    #    r + R included; evaluators rank each triple's answer among all entities.
    queries = TrainingQueries(split_triples(data, "train"), num_entities, num_relations)
    evaluators = {split: LinkPredictionEvaluator.from_data(data, split) for split in ("valid", "test")}
    shuffle = torch.Generator().manual_seed(args.seed)

    def train_epoch(epoch: int) -> float:
        model.train()
        for group in optimizer.param_groups:  # warm-up and cosine decay, or constant
            group["lr"] = config.learning_rate(epoch)
        total = 0.0
        for index in queries.batch_indices(config.batch_size, shuffle):
            heads, relations, positives = queries.batch(index)
            encoded = model.encode(**graph)  # the whole graph, every layer
            loss = model.loss(encoded, heads, relations, positives)  # 1-N against all entities (or sampled ones)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            total += loss.item()
        return total / queries.num_batches(config.batch_size)

    @torch.no_grad()
    def evaluate(split: str):
        model.eval()
        encoded = model.encode(**graph)  # once, then every query is scored against all entities
        return evaluators[split].evaluate(lambda entities, relations: model.score_all(encoded, entities, relations))

    # 4. Train, validate every eval_every epochs, keep the best weights.
    best_mrr, best_epoch, best_weights = -1.0, 0, None
    start = time.perf_counter()
    for epoch in range(config.epochs):
        loss = train_epoch(epoch)
        if (epoch + 1) % config.eval_every == 0 or epoch + 1 == config.epochs:
            mrr = evaluate("valid")["both.mrr"]
            if mrr > best_mrr:
                best_mrr, best_epoch = mrr, epoch + 1
                best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            minutes = (time.perf_counter() - start) / 60
            print(
                f"epoch {epoch + 1:4d}  loss {loss:.5f}  valid MRR {mrr:.4f}  "
                f"(best {best_mrr:.4f} at {best_epoch})  {minutes:.1f} min",
                flush=True,
            )

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


# every expected failure (offline download, unwritable --save, ...) is one line, exit code 2
raise SystemExit(run_reporting_errors("link_pred_codex", main, args.debug))
