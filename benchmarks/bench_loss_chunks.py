"""Training-epoch time with cache-sized against GPU-sized chunks of the fused loss.

On a GPU each chunk of :func:`~torch_wge.nn.kge.loss.one_to_n_loss` costs a few
dozen kernel launches whatever its size, so the loss scores a batch in chunks of
``GPU_CHUNK_ELEMENTS`` there instead of the CPU's cache-sized ``CHUNK_ELEMENTS``.
This times one training epoch with each, alternating, after a warm-up epoch::

    PYTHONPATH=. python benchmarks/bench_loss_chunks.py --dataset fb15k-237 --root data --device cuda
"""

import argparse
import time

import torch

import torch_wge.nn.kge.loss as loss_module
from torch_wge.training import TrainConfig, Trainer, load_data


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fb15k-237")
    parser.add_argument("--root", default="data")
    parser.add_argument("--recipe", default="large")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    config = TrainConfig(dataset=args.dataset, root=args.root, recipe=args.recipe, epochs=10, device=args.device)
    _, data = load_data(config)
    run = Trainer(config, data, "runs/bench-loss-chunks", progress=False)
    run.train_epoch()
    sizes = [("cpu-sized", loss_module.CHUNK_ELEMENTS), ("gpu-sized", loss_module.GPU_CHUNK_ELEMENTS)]
    for name, chunk in sizes * args.repeat:
        loss_module.GPU_CHUNK_ELEMENTS = chunk
        synchronize(run.device)
        start = time.perf_counter()
        run.train_epoch()
        synchronize(run.device)
        print(f"{name} chunks ({chunk} elements): epoch {time.perf_counter() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
