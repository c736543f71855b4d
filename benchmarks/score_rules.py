"""A trained WGE's filtered test metrics under two ways of combining its layers' scores: torch_wge's
weighted sum of logits :math:`\\sum_k \\alpha_k f_k` and the research code's weighted sum of
probabilities :math:`\\sum_k \\alpha_k \\sigma(f_k)` (in float32, where :math:`\\sigma` rounds to 1
above a logit of about 17, so that answers can tie), each with optimistic, realistic and
pessimistic ranks. Whether a gap to the paper's numbers could come from how its code scores and
breaks ties, rather than from the model.

Example::

    python benchmarks/score_rules.py runs/fb15k-237/best.pt --root data --json score-rules.json
"""

import argparse
import sys
from pathlib import Path

import torch
from common import write_record


def summary(results) -> dict:
    """MRR, Hits@1 and Hits@10 of both directions of a :class:`LinkPredictionResults`."""
    return {name: results.metric(name) for name in ("mrr", "hits@1", "hits@10")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a best.pt or last.pt of torch-wge train")
    parser.add_argument("--root", help="the datasets' folder (default: the run's own)")
    parser.add_argument("--split", default="test", choices=["valid", "test"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from torch_wge.evaluation import LinkPredictionEvaluator
    from torch_wge.inference import graph_inputs_on, load_trained

    model, config, _, data = load_trained(args.checkpoint, root=args.root, log=False)
    evaluator = LinkPredictionEvaluator.from_data(data, args.split)
    weights = model.layer_weights.view(-1, 1, 1)
    with torch.no_grad():
        encoded = model.encode(**graph_inputs_on(model, data))
        rules = {
            "sum of logits (torch_wge)": lambda e, r: model.score_all(encoded, e, r),
            "sum of sigmoids (research code)": lambda e, r: (
                torch.sigmoid(model.layer_scores(encoded, e, r)) * weights
            ).sum(0),
        }
        metrics = {
            rule: {
                ranks: summary(evaluator.evaluate(score, config.eval_batch_size, rank_type=ranks))
                for ranks in ("optimistic", "realistic", "pessimistic")
            }
            for rule, score in rules.items()
        }
    for rule, by_ranks in metrics.items():
        mrrs = ", ".join(f"{ranks} {m['mrr']:.4f}" for ranks, m in by_ranks.items())
        print(f"{rule}: MRR {mrrs}")
    if args.json:
        fields = {"dataset": config.dataset, "checkpoint": str(args.checkpoint), "split": args.split}
        write_record(args.json, "score_rules", {**fields, "metrics": metrics})
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
