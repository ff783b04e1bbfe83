"""Horovod's PyTorch recipe on hvd: train the classic MNIST CNN data-parallel.

    hvdrun -np 2 -H localhost:2 python examples/pytorch_mnist.py
    hvdrun -np 4 python examples/pytorch_mnist.py --data mnist.npz --epochs 3

--data takes an MNIST .npz (x_train, y_train, x_test, y_test, as Keras ships it). Without it the
example uses scikit-learn's bundled handwritten digits (8x8, upscaled to 28x28), so it runs
offline. Each step: every rank trains on its own shard (DistributedSampler); gradients are
averaged by DistributedOptimizer while backward runs; rank 0 alone writes checkpoints.
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import hvd.torch as hvd


class Net(nn.Module):
    """Two 3x3 convolutions, max-pool, dropout, a 128-unit dense layer: 1.2 M parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(9216, 128)
        self.dropout2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def load_data(path):
    """(train, test) TensorDatasets of 1x28x28 float images, normalised, and int64 labels."""
    if path:
        with np.load(path) as d:
            parts = [d["x_train"], d["y_train"], d["x_test"], d["y_test"]]
        xtr, ytr, xte, yte = parts
        xtr = torch.from_numpy(xtr).float().unsqueeze(1) / 255.0
        xte = torch.from_numpy(xte).float().unsqueeze(1) / 255.0
    else:
        from sklearn.datasets import load_digits
        digits = load_digits()
        images = torch.from_numpy(digits.images).float().unsqueeze(1) / 16.0
        images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
        labels = digits.target
        order = np.random.RandomState(0).permutation(len(labels))
        cut = int(0.8 * len(labels))
        xtr, xte = images[order[:cut]], images[order[cut:]]
        ytr, yte = labels[order[:cut]], labels[order[cut:]]
    mean, std = xtr.mean(), xtr.std()
    return (TensorDataset((xtr - mean) / std, torch.as_tensor(ytr, dtype=torch.int64)),
            TensorDataset((xte - mean) / std, torch.as_tensor(yte, dtype=torch.int64)))


def save_checkpoint(directory, epoch, model, optimizer):
    """Rank 0 only; temp file then rename, so a crash never leaves a torn checkpoint."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"checkpoint-{epoch}.pt")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".checkpoint-", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        torch.save({"epoch": epoch, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict()}, f)
    os.replace(tmp, final)
    return final


def latest_checkpoint(directory):
    if not directory or not os.path.isdir(directory):
        return None
    epochs = [int(n[len("checkpoint-"):-3]) for n in os.listdir(directory)
              if n.startswith("checkpoint-") and n.endswith(".pt")]
    return os.path.join(directory, f"checkpoint-{max(epochs)}.pt") if epochs else None


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value, dtype=torch.float64), name=name).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="MNIST .npz; default: scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01, help="for one rank; scaled by size")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--checkpoint-dir", help="rank 0 writes checkpoint-<epoch>.pt here; a "
                        "run resumes from the latest one")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    hvd.init()  # also fits torch's CPU threads to this rank's share of the host's CPUs
    torch.manual_seed(args.seed)
    use_cuda = torch.cuda.is_available() and hvd.cuda_built()
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())  # one GPU per local rank
    device = torch.device("cuda" if use_cuda else "cpu")

    train, test = load_data(args.data)
    train_sampler = DistributedSampler(train, num_replicas=hvd.size(), rank=hvd.rank(),
                                       seed=args.seed)
    test_sampler = DistributedSampler(test, num_replicas=hvd.size(), rank=hvd.rank(),
                                      shuffle=False)
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=256, sampler=test_sampler)

    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    start_epoch = 1
    checkpoint = latest_checkpoint(args.checkpoint_dir) if hvd.rank() == 0 else None
    if checkpoint:
        state = torch.load(checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
        print(f"resuming from {checkpoint}", flush=True)
    start_epoch = hvd.broadcast_object(start_epoch, root_rank=0, name="start_epoch")
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    accuracy = 0.0
    for epoch in range(start_epoch, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        for data, target in train_loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
        model.eval()
        test_loss, correct, seen = 0.0, 0, 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(1).eq(target).sum().item()
                seen += len(target)
        test_loss = metric_average(test_loss / seen, "avg_loss")
        accuracy = metric_average(correct / seen, "avg_accuracy")
        if hvd.rank() == 0:
            print(f"epoch {epoch}: test loss {test_loss:.4f}, test accuracy "
                  f"{100 * accuracy:.2f}% ({hvd.size()} ranks)", flush=True)
            if args.checkpoint_dir:
                save_checkpoint(args.checkpoint_dir, epoch, model, optimizer)
    if hvd.rank() == 0:
        print(f"final test accuracy: {100 * accuracy:.2f}%", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
