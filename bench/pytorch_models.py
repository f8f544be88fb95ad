"""The PyTorch side of the model suite (BENCHMARKS.md "Model suite"): the networks of
bench/models.cc in Debian's PyTorch, same layers, batch, optimizer and parameter count
(convolutions NCHW here, NHWC in stepscope: the same products), float32, random inputs and
labels from a fixed seed. Most are batch 64, SGD, softmax cross-entropy; the embedding model
and the LSTM have their own batch, loss and optimizer (see their builders).

    python3 bench/pytorch_models.py --model lenet [--threads 2] [--steps N] [--warmup W] [--json]

builds the model, runs W warm-up steps, times N steps one by one and prints one JSON line as
model_bench does: model, side "pytorch", threads, median_ms, min_ms, steps, page_faults_per_step
(minor faults over the timed steps / N), max_rss_kib, parameters, extra_parameters (those the
PyTorch module has beyond stepscope's, with extra_parameters_why; 0 for most), loss. The FLOPs of a step are
counted once, from the model's definition in bench/models.cc (model_bench --list);
bench/compare_models.py uses that figure for both sides.

A new model is one entry of MODELS: a function that builds the model, its optimizers and its
inputs, and returns (module, optimizers, a function computing the batch's loss); classifier()
makes one for a network of one float input scored by softmax cross-entropy and trained by SGD.
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


def bn_cnn():
    # Conv without bias + batch norm (TF's epsilon 1e-3 and momentum 0.99, which is PyTorch's
    # 0.01; training mode: batch statistics and running-average updates) + ReLU + max-pool, twice,
    # then dense 128 + ReLU, dropout 0.3, dense 10.
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01),
                nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*block(1, 32), *block(32, 64),
                         nn.Flatten(),
                         nn.Linear(7 * 7 * 64, 128), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(128, 10))


def classifier(shape, build, lr, classes=10, batch=BATCH):
    """A network of one float input [batch, *shape] (normal) scored by softmax cross-entropy
    against labels in [0, classes), trained by SGD(lr)."""
    def make():
        model = build()
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        x = torch.randn(batch, *shape)
        y = torch.randint(0, classes, (batch,))
        return model, [opt], lambda: loss_fn(model(x), y)
    return make


EMBEDDING_VOCABS = (100000, 10000, 1000, 24)
EMBEDDING_DIM = 16
EMBEDDING_BATCH = 512


class Esmm(nn.Module):
    """The ESMM-like model of bench/models.cc: four categorical features embedded in 16 dimensions
    (nn.Embedding(sparse=True): the gradient is the looked-up rows, as stepscope's IndexedSlices),
    concatenated [512, 64], two towers dense 128 + ReLU, dense 1 (CTR and CVR logits)."""

    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(v, EMBEDDING_DIM, sparse=True) for v in EMBEDDING_VOCABS)
        for table in self.tables:
            nn.init.normal_(table.weight, std=0.05)
        width = len(EMBEDDING_VOCABS) * EMBEDDING_DIM

        def tower():
            return nn.Sequential(nn.Linear(width, 128), nn.ReLU(), nn.Linear(128, 1))
        self.ctr = tower()
        self.cvr = tower()

    def forward(self, ids):
        shared = torch.cat([table(i) for table, i in zip(self.tables, ids)], 1)
        return self.ctr(shared), self.cvr(shared)


def embedding():
    # Adagrad(0.05) on every parameter, as stepscope's AdagradOptimizer: the accumulator starts at
    # 0.1 (TF's initial_accumulator_value; PyTorch's default is 0) and the tables' updates are
    # sparse (PyTorch's Adagrad applies a sparse gradient to the touched rows only, as
    # SparseApplyAdagrad). Loss: the two towers' mean sigmoid cross-entropies, summed.
    model = Esmm()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05, initial_accumulator_value=0.1)
    bce = nn.BCEWithLogitsLoss()
    ids = [torch.randint(0, v, (EMBEDDING_BATCH,), dtype=torch.int32) for v in EMBEDDING_VOCABS]
    click = torch.randint(0, 2, (EMBEDDING_BATCH, 1)).float()
    conversion = torch.randint(0, 2, (EMBEDDING_BATCH, 1)).float()

    def loss():
        ctr, cvr = model(ids)
        return bce(ctr, click) + bce(cvr, conversion)
    return model, [opt], loss


LSTM_STEPS, LSTM_BATCH, LSTM_DEPTH, LSTM_UNITS, LSTM_CLASSES = 20, 32, 64, 128, 64


class LstmClassifier(nn.Module):
    """nn.LSTM(64, 128) over 20 steps of [32, 64], dense 64 on the last output. stepscope's
    BasicLSTMCell has one bias [4 units], nn.LSTM two (bias_ih and bias_hh, always added
    together): the same network with 512 parameters more, trained as PyTorch users train it.
    TF's forget_bias 1.0 is bias_ih's forget-gate quarter starting at 1 (PyTorch's gate order is
    i, f, g, o)."""

    extra_parameters = 4 * LSTM_UNITS
    extra_parameters_why = "nn.LSTM has two biases (bias_ih, bias_hh), BasicLSTMCell one"

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(LSTM_DEPTH, LSTM_UNITS)  # batch_first=False: [T, batch, depth]
        with torch.no_grad():
            self.lstm.bias_ih_l0.zero_()
            self.lstm.bias_hh_l0.zero_()
            self.lstm.bias_ih_l0[LSTM_UNITS:2 * LSTM_UNITS] = 1.0
        self.dense = nn.Linear(LSTM_UNITS, LSTM_CLASSES)

    def forward(self, x):
        outputs, _ = self.lstm(x)
        return self.dense(outputs[-1])


def lstm():
    # SGD(0.1), softmax cross-entropy over 64 classes, as bench/models.cc.
    model = LstmClassifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(LSTM_STEPS, LSTM_BATCH, LSTM_DEPTH)
    y = torch.randint(0, LSTM_CLASSES, (LSTM_BATCH,))
    return model, [opt], lambda: loss_fn(model(x), y)


# name: a function returning (module, optimizers, loss of the batch); as bench/models.cc.
MODELS = {
    "mlp": classifier((784,), mlp, 0.1),
    "lenet": classifier((1, 28, 28), lenet, 0.01),
    "deep_cnn": classifier((3, 32, 32), deep_cnn, 0.01),
    "bn_cnn": classifier((1, 28, 28), bn_cnn, 0.01),
    "embedding": embedding,
    "lstm": lstm,
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
    model, opts, compute_loss = MODELS[args.model]()

    def step():
        for opt in opts:
            opt.zero_grad()
        loss = compute_loss()
        loss.backward()
        for opt in opts:
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
        loss = float(compute_loss())
    print(json.dumps({
        "model": args.model, "side": "pytorch", "threads": args.threads,
        "median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4),
        "steps": args.steps, "page_faults_per_step": round((usage.ru_minflt - faults) / args.steps, 2),
        "max_rss_kib": usage.ru_maxrss,
        "parameters": sum(p.numel() for p in model.parameters()),
        "extra_parameters": getattr(model, "extra_parameters", 0),
        "extra_parameters_why": getattr(model, "extra_parameters_why", None),
        "loss": loss if math.isfinite(loss) else None,
        "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
