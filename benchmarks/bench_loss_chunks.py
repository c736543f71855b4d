"""Training-epoch time with cache-sized against GPU-sized chunks of the fused loss.

On a GPU each chunk of :func:`~torch_wge.nn.decoders.loss.one_to_n_loss` costs a few
dozen kernel launches whatever its size, so the loss scores a batch in chunks of
``GPU_CHUNK_ELEMENTS`` there instead of the CPU's cache-sized ``CHUNK_ELEMENTS``.
This times one training epoch with each, alternating, after a warm-up epoch::

    PYTHONPATH=. python benchmarks/bench_loss_chunks.py --dataset fb15k-237 --root data --device cuda
"""

import argparse
import tempfile

from bench_speed import Clock

import torch_wge.nn.decoders.loss as loss_module
from torch_wge.training import TrainConfig, Trainer, load_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fb15k-237")
    parser.add_argument("--root", default="data")
    parser.add_argument("--recipe", default="large")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    if args.device == "cpu":
        parser.error("--device: the CPU always uses CHUNK_ELEMENTS; name a GPU (cuda, cuda:1, ...)")
    config = TrainConfig(dataset=args.dataset, root=args.root, recipe=args.recipe, epochs=10, device=args.device)
    _, data = load_data(config)
    clock = Clock(args.device)
    with tempfile.TemporaryDirectory() as out:
        run = Trainer(config, data, out, progress=False)
        run.train_epoch()
        sizes = [("cpu-sized", loss_module.CHUNK_ELEMENTS), ("gpu-sized", loss_module.GPU_CHUNK_ELEMENTS)]
        for name, chunk in sizes * args.repeat:
            loss_module.GPU_CHUNK_ELEMENTS = chunk
            start = clock()
            run.train_epoch()
            print(f"{name} chunks ({chunk} elements): epoch {clock() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
