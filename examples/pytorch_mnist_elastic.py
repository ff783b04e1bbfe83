"""pytorch_mnist.py as an elastic job: training goes on when a worker fails and grows when hosts
appear (docs/elastic.md).

    hvdrun --min-np 2 -H localhost:2,127.0.0.1:1 python examples/pytorch_mnist_elastic.py \
        --simulate-failure 2:2
    hvdrun --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh \
        python examples/pytorch_mnist_elastic.py

The model, optimizer, data position (ElasticSampler) and epoch live in a TorchState committed
every few batches. A worker's failure costs the batches since the last commit: the survivors
restore it, regroup under new ranks, rescale the learning rate and go on. --simulate-failure
WORKER:EPOCH makes worker WORKER (hvdrun's number, the [N] of its output) exit at the start of
that epoch, once, to try it out.
"""
import argparse
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

import hvd.torch as hvd
from pytorch_mnist import Net, load_data, metric_average, save_checkpoint


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="MNIST .npz; default: scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.01, help="for one worker; scaled by size")
    parser.add_argument("--batches-per-commit", type=int, default=5)
    parser.add_argument("--checkpoint-dir", help="rank 0 writes checkpoint-<epoch>.pt here")
    parser.add_argument("--simulate-failure", metavar="WORKER:EPOCH")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    fail_worker, fail_epoch = map(int, (args.simulate_failure or "-1:-1").split(":"))
    worker = int(os.environ.get("HVD_WORKER_ID", "-1"))
    failed_once = os.path.join(tempfile.gettempdir(),
                               f"hvd-elastic-example-{os.environ.get('HVD_JOB_ID')}")

    hvd.init()
    torch.manual_seed(args.seed)
    train, test = load_data(args.data)
    model = Net()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9),
        named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(train, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)

    def evaluate():
        test_sampler = DistributedSampler(test, num_replicas=hvd.size(), rank=hvd.rank(),
                                          shuffle=False)
        correct, seen = 0, 0
        model.eval()
        with torch.no_grad():
            for data, target in DataLoader(test, batch_size=256, sampler=test_sampler):
                correct += model(data).argmax(1).eq(target).sum().item()
                seen += len(target)
        return metric_average(correct / seen, "avg_accuracy")

    @hvd.elastic.run
    def train_epochs(state):
        accuracy = 0.0
        for state.epoch in range(state.epoch, args.epochs + 1):
            if (worker == fail_worker and state.epoch == fail_epoch
                    and not os.path.exists(failed_once)):
                open(failed_once, "w").close()
                print(f"worker {worker}: simulating a failure at epoch {state.epoch}", flush=True)
                os._exit(1)
            model.train()
            # The sampler yields only what this epoch has left, spread over this round's workers.
            for batch, (data, target) in enumerate(loader):
                optimizer.zero_grad()
                F.nll_loss(model(data), target).backward()
                optimizer.step()
                sampler.record_batch(batch, args.batch_size)
                state.batch += 1
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            accuracy = evaluate()
            if hvd.rank() == 0:
                print(f"epoch {state.epoch}: test accuracy {100 * accuracy:.2f}% "
                      f"({hvd.size()} workers)", flush=True)
                if args.checkpoint_dir:
                    save_checkpoint(args.checkpoint_dir, state.epoch, model, optimizer)
            state.batch = 0
            sampler.set_epoch(state.epoch + 1)
            state.epoch += 1  # the commit records the next epoch as the one to run
            state.commit()
        return accuracy

    def on_reset():
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    sampler.set_epoch(1)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=1, batch=0)
    state.register_reset_callbacks([on_reset])
    accuracy = train_epochs(state)
    if hvd.rank() == 0:
        print(f"final test accuracy: {100 * accuracy:.2f}% ({hvd.size()} workers)", flush=True)
    if os.path.exists(failed_once) and hvd.rank() == 0:
        os.remove(failed_once)


if __name__ == "__main__":
    main()
