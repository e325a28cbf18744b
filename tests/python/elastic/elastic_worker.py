"""A worker of `kolorun --elastic` for test_elastic.py: trains regression.py's
problem with kolo.torch.elastic, Horovod's way, and kills itself when told.

    elastic_worker.py EPOCHS BATCH COMMIT_EVERY STEP_SECONDS
                      [KILL_WORKER KILL_AT_STEP]

Each step takes at least STEP_SECONDS, so that a replacement has time to
start and join.

The state holds the model, the optimizer, the sampler, the epoch and the
batch, and a log of every applied step's sample indices (all ranks'), which
the test replays in one process. Prints, as the test reads them:
    worker W: reset R: rank r of n at step S (reached F)
    worker W: final {json}
"""

import json
import os
import signal
import sys
import time

import kolo.torch as hvd
import regression

EPOCHS, BATCH, COMMIT_EVERY = (int(a) for a in sys.argv[1:4])
STEP_SECONDS = float(sys.argv[4])
KILL_WORKER, KILL_AT = (int(a) for a in sys.argv[5:7]) if len(sys.argv) > 5 else (-1, -1)
ME = int(os.environ["KOLO_ELASTIC_WORKER"])


def main():
    hvd.init()
    x, y = regression.dataset()
    net = regression.model()
    optimizer = hvd.DistributedOptimizer(regression.sgd(net.parameters()),
                                         named_parameters=net.named_parameters(),
                                         op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(list(range(regression.SAMPLES)), seed=3)
    state = hvd.elastic.TorchState(net, optimizer, sampler=sampler, epoch=0,
                                   batch=0, steps=0, log=[])
    furthest = [0]

    def on_reset():
        print(f"worker {ME}: reset {state._native.resets}: rank {hvd.rank()} "
              f"of {hvd.size()} at step {state.steps} (reached {furthest[0]})",
              flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < EPOCHS:
            # The sampler's split of what is left of the epoch is new after
            # every reset: its batches count from 0.
            for b in range((len(state.sampler) + BATCH - 1) // BATCH):
                if ME == KILL_WORKER and state.steps == KILL_AT:
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(STEP_SECONDS)
                mine = state.sampler.get_indices(b, BATCH)
                optimizer.zero_grad()
                regression.loss(net, x, y, mine).backward()
                optimizer.step()
                everyone = hvd.allgather_object(mine)
                state.log.append((state.epoch, [i for part in everyone for i in part]))
                state.sampler.record_batch(b, BATCH)
                state.batch += 1
                state.steps += 1
                furthest[0] = max(furthest[0], state.steps)
                if state.steps % COMMIT_EVERY == 0:
                    state.commit()
            state.epoch += 1
            state.batch = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return dict(worker=ME, rank=hvd.rank(), size=hvd.size(),
                    resets=state._native.resets, steps=state.steps,
                    log=state.log,
                    parameters=[p.detach().reshape(-1).tolist()
                                for p in net.parameters()])

    result = train(state)
    print(f"worker {ME}: final {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
