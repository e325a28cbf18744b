"""Elastic training with kolo.torch, as Horovod's elastic scripts do it: the
job goes on when a worker dies, from its last commit.

    kolorun --elastic -np 4 --min-np 2 python examples/python/elastic_train.py

kolorun starts the workers, replaces one that dies and publishes each
round's members (docs/reference/kolorun.md). --kill-worker W
--kill-at-batch B makes worker W kill itself at batch B of its first round,
to watch a reset happen.
"""

import argparse
import os
import signal

import torch

import kolo.torch as hvd


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batches-per-commit", type=int, default=4)
    parser.add_argument("--kill-worker", type=int, default=-1)
    parser.add_argument("--kill-at-batch", type=int, default=-1)
    return parser.parse_args()


def synthetic_dataset(samples=2048, features=16, classes=4):
    """Points labelled by the class whose fixed centre is nearest."""
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(classes, features, generator=generator) * 2
    labels = torch.randint(classes, (samples,), generator=generator)
    points = centres[labels] + torch.randn(samples, features, generator=generator)
    return torch.utils.data.TensorDataset(points, labels)


def main():
    args = parse_args()
    hvd.init()  # in an elastic job the world comes with each round
    worker = int(os.environ.get("KOLO_ELASTIC_WORKER", "-1"))
    torch.manual_seed(1)
    dataset = synthetic_dataset()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9),
        named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, seed=2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                         sampler=sampler)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler,
                                   epoch=0, batch=0)

    def on_reset():
        # The learning rate follows the world's size, as the global batch does.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        if hvd.rank() == 0:
            print(f"reset: {hvd.size()} workers, back at epoch {state.epoch} "
                  f"batch {state.batch}", flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        while state.epoch < args.epochs:
            total = torch.zeros(2, dtype=torch.float64)
            # After a reset the loader walks the new split of what is left.
            for batch, (x, y) in enumerate(loader):
                if (worker == args.kill_worker and state.batch == args.kill_at_batch
                        and state._native.resets == 0):
                    os.kill(os.getpid(), signal.SIGKILL)
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                total += torch.tensor([loss.item() * len(y), len(y)], dtype=torch.float64)
                state.sampler.record_batch(batch, args.batch_size)
                state.batch += 1
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            total = hvd.allreduce(total, op=hvd.Sum, name=f"loss.{state.epoch}")
            if hvd.rank() == 0:
                print(f"epoch {state.epoch}: loss {total[0] / total[1]:.4f} "
                      f"on {hvd.size()} workers", flush=True)
            state.epoch += 1
            state.batch = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return state.epoch

    epochs = train(state)
    print(f"done: {epochs} epochs", flush=True)


if __name__ == "__main__":
    main()
