"""The PyTorch side of the model suite (BENCHMARKS.md "Model suite"): the networks of
bench/models.cc in Debian's PyTorch, same layers and parameter count (convolutions NCHW here,
NHWC in stepscope: the same products), batch 64, float32, SGD, softmax cross-entropy, random
inputs and labels from a fixed seed.

    python3 bench/pytorch_models.py --model lenet [--threads 2] [--steps N] [--warmup W] [--json]

builds the model, runs W warm-up steps, times N steps one by one and prints one JSON line as
model_bench does: model, side "pytorch", threads, median_ms, min_ms, steps, page_faults_per_step
(minor faults over the timed steps / N), max_rss_kib, parameters, loss. The FLOPs of a step are
counted once, from the model's definition in bench/models.cc (model_bench --list);
bench/compare_models.py uses that figure for both sides.

A new model is one entry of MODELS: (input shape without the batch, builder, learning rate).
"""
import argparse
import json
import math
import resource
import statistics
import sys
import time

import torch
from torch import nn

BATCH = 64
SEED = 42


def mlp():
    # The model of train_bench's BM_MlpTrainStep: 784-256-256-10, ReLU.
    return nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(),
        nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, 10))


def lenet():
    # The TensorFlow MNIST tutorial's network; padding 2 on a 5x5 kernel is TF's SAME.
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(7 * 7 * 64, 1024), nn.ReLU(),
        nn.Linear(1024, 10))


def deep_cnn():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*block(3, 64), *block(64, 128), *block(128, 128),
                         nn.Flatten(), nn.Linear(4 * 4 * 128, 10))


# name: (input shape without the batch, builder, SGD learning rate); as bench/models.cc.
MODELS = {
    "mlp": ((784,), mlp, 0.1),
    "lenet": ((1, 28, 28), lenet, 0.01),
    "deep_cnn": ((3, 32, 32), deep_cnn, 0.01),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=None, help="default: max(2, steps / 5)")
    parser.add_argument("--json", action="store_true", help="the only output format (as model_bench)")
    args = parser.parse_args()
    warmup = max(2, args.steps // 5) if args.warmup is None else args.warmup

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    shape, build, lr = MODELS[args.model]
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(BATCH, *shape)
    y = torch.randint(0, 10, (BATCH,))

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(1000 * (time.perf_counter() - start))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with torch.no_grad():
        loss = float(loss_fn(model(x), y))
    print(json.dumps({
        "model": args.model, "side": "pytorch", "threads": args.threads,
        "median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4),
        "steps": args.steps, "page_faults_per_step": round((usage.ru_minflt - faults) / args.steps, 2),
        "max_rss_kib": usage.ru_maxrss,
        "parameters": sum(p.numel() for p in model.parameters()),
        "loss": loss if math.isfinite(loss) else None,
        "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
