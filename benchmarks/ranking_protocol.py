"""How much the ranking protocol moves a trained model's metrics.

torch_wge ranks by the logit f = sum_k alpha_k f_k with realistic ranks for ties.
The published WGE code ranks by sum_k alpha_k sigmoid(f_k) instead: in float32,
sigmoid rounds to exactly 1.0 for logits above ~17, so confident candidates tie
and the tie rule decides their order. This script evaluates one checkpoint under
both scores and the three tie rules (optimistic, realistic, pessimistic) and
prints a markdown table, plus how many queries have a tie at their answer::

    python benchmarks/ranking_protocol.py runs/reproduce/codex-s/wge/best.pt --split test --root data
"""

import argparse

import torch

from torch_wge.evaluation import LinkPredictionEvaluator
from torch_wge.evaluation.ranks import RANK_TYPES
from torch_wge.training.inference import graph_inputs_on, load_trained


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--split", default="test", choices=["valid", "test"])
    parser.add_argument("--root", default=None, help="dataset root (default: the run's own)")
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()

    model, _, _, data = load_trained(args.checkpoint, args.root, "cpu")
    evaluator = LinkPredictionEvaluator.from_data(data, args.split)
    with torch.no_grad():
        encoded = model.encode(**graph_inputs_on(model, data))
    weights = model.layer_weights.view(-1, 1, 1)
    scores = {
        "logits  sum_k a_k f_k": lambda e, r: model.score_all(encoded, e, r),
        "sigmoid sum_k a_k sigmoid(f_k)": lambda e, r: (weights * model.layer_scores(encoded, e, r).sigmoid()).sum(0),
    }
    print(f"{args.checkpoint}, {args.split}, {evaluator.num_queries} queries (both sides), filtered\n")
    print("| score | ties | MRR | MR | H@1 | H@3 | H@10 | queries with a tie at the answer |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, score_fn in scores.items():
        ranks = {
            kind: evaluator.compute_ranks(score_fn, args.batch_size, rank_type=kind)
            for kind in ("optimistic", "pessimistic")
        }
        ranks["realistic"] = (ranks["optimistic"] + ranks["pessimistic"]) / 2
        tied = int((ranks["pessimistic"] > ranks["optimistic"]).sum())
        for kind in RANK_TYPES:
            m = evaluator.summarize(ranks[kind], kind)
            print(
                f"| {name} | {kind} | {m['mrr']:.4f} | {m['mr']:.1f} | {100 * m['hits@1']:.2f} | "
                f"{100 * m['hits@3']:.2f} | {100 * m['hits@10']:.2f} | {tied} |"
            )


if __name__ == "__main__":
    main()
