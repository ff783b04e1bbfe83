"""The training script of the elastic end-to-end tests: a small linear model trained for a fixed
number of steps through hvd.elastic.run, in NumPy (hvd.elastic.ObjectState) or, with
ELASTIC_FRAMEWORK=torch, in PyTorch (TorchState with the model and its optimizer). The tests
steer it through the environment:

  CRASH_WORKER=N, CRASH_AT=S  worker N dies (exit 3) at step S, once (CRASH_MARKER records it);
                              CRASH_WORKER=N,M,...: each of them, at that step
  CRASH_SIGNAL=KILL           it dies by SIGKILL instead
  GROW_FILE=F, GROW_AT=S      rank 0 creates F at step S (the discovery script then offers more)
  WANT_SIZE=K                 the last step waits (up to 90 s) until the job has K workers
  START_CRASH_WORKER=N        worker N exits before hvd.init(), after START_CRASH_DELAY s
  SHOW_HOST=1                 each worker prints the network namespace it runs in
  PID_DIR=D                   each worker writes its pid to D/<worker id> (for chaos.py)
  SHOW_STEPS=1                each worker prints "worker N at step S" before each step
  USE_HOROVOD_COMPAT=1        (torch) import horovod.torch, as a Horovod script does

It prints, per worker, the step it trains from each time it enters a round ("worker N trains
from step S as rank R of K"), and at the end the step count, the sizes it trained at and whether every rank ends with
the same weights. Both frameworks train the same model (SGD with momentum on mean squared
error), and every rank's batch depends on the step only, so the result does not depend on which
workers ran which step.
"""
import os
import signal
import sys
import time

import numpy as np

if os.environ.get("START_CRASH_WORKER") == os.environ["HVD_WORKER_ID"]:
    time.sleep(float(os.environ.get("START_CRASH_DELAY", "0")))
    sys.exit(f"worker {os.environ['HVD_WORKER_ID']}: this host lacks something")

LR, MOMENTUM = 0.05, 0.9


def batch(step, rank):
    x = np.random.default_rng(step * 1000 + rank).normal(size=(8, 4)).astype(np.float32)
    return x, x.sum(axis=1, keepdims=True)


class NumpyModel:
    """w (4, 1) and b (1,), their momentum buffers; the state is the arrays themselves."""

    def __init__(self):
        import hvd.numpy as hvd
        self.hvd, self.elastic = hvd, hvd.elastic
        hvd.init()
        rng = np.random.default_rng(1)
        self.params = {"w": rng.uniform(-0.5, 0.5, (4, 1)).astype(np.float32),
                       "b": np.zeros(1, np.float32)}
        self.velocity = {k: np.zeros_like(v) for k, v in self.params.items()}

    def state(self, **attributes):
        return self.elastic.ObjectState(self.hvd.broadcast_object, self.hvd.rank,
                                        params=self.params, velocity=self.velocity, **attributes)

    def step(self, state):
        x, y = batch(state.step, self.hvd.rank())
        p, v = state.params, state.velocity
        dout = 2 * (x @ p["w"] + p["b"] - y) / y.size  # d(mean squared error)/d(output)
        grads = {"w": x.T @ dout, "b": dout.sum(axis=0)}
        for k in p:
            grads[k] = self.hvd.allreduce(grads[k], op=self.hvd.Average, name=f"grad.{k}")
            v[k] = MOMENTUM * v[k] + grads[k]  # as torch.optim.SGD's momentum
            p[k] = p[k] - LR * v[k]

    def weights(self, state):
        return np.concatenate([state.params["w"].ravel(), state.params["b"]])


class TorchModel:
    def __init__(self):
        import torch
        if os.environ.get("USE_HOROVOD_COMPAT"):
            import horovod.torch as hvd
        else:
            import hvd.torch as hvd
        self.torch, self.hvd, self.elastic = torch, hvd, hvd.elastic
        hvd.init()
        torch.manual_seed(1)
        self.model = torch.nn.Linear(4, 1)
        self.optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM),
            named_parameters=self.model.named_parameters())

    def state(self, **attributes):
        return self.elastic.TorchState(self.model, self.optimizer, **attributes)

    def step(self, state):
        x, y = map(self.torch.from_numpy, batch(state.step, self.hvd.rank()))
        self.optimizer.zero_grad()
        self.torch.nn.functional.mse_loss(self.model(x), y).backward()
        self.optimizer.step()

    def weights(self, state):
        return np.concatenate([p.detach().numpy().ravel() for p in self.model.parameters()])


model = TorchModel() if os.environ.get("ELASTIC_FRAMEWORK") == "torch" else NumpyModel()
hvd = model.hvd
if os.environ.get("SHOW_HOST"):
    print(f"worker {os.environ['HVD_WORKER_ID']} runs on {os.readlink('/proc/self/ns/net')}",
          flush=True)
me = int(os.environ["HVD_WORKER_ID"])
if os.environ.get("PID_DIR"):
    with open(os.path.join(os.environ["PID_DIR"], f"{me}.partial"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(os.environ["PID_DIR"], f"{me}.partial"),
               os.path.join(os.environ["PID_DIR"], str(me)))
show_steps = bool(os.environ.get("SHOW_STEPS"))
steps = int(os.environ.get("STEPS", "30"))
crash_workers = {int(w) for w in os.environ.get("CRASH_WORKER", "-1").split(",")}
crash_at = int(os.environ.get("CRASH_AT", "-1"))
marker = os.environ.get("CRASH_MARKER", "")
grow_file = os.environ.get("GROW_FILE", "")
grow_at = int(os.environ.get("GROW_AT", "-1"))
want_size = int(os.environ.get("WANT_SIZE", "0"))
resets = []


@model.elastic.run
def train(state):
    deadline = time.monotonic() + 90
    print(f"worker {me} trains from step {state.step} as rank {hvd.rank()} of {hvd.size()}",
          flush=True)
    while state.step < steps:
        if me in crash_workers and state.step == crash_at and not os.path.exists(f"{marker}.{me}"):
            open(f"{marker}.{me}", "w").close()
            print(f"worker {me} dies at step {state.step}", flush=True)
            if os.environ.get("CRASH_SIGNAL") == "KILL":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        if hvd.rank() == 0 and grow_file and state.step == grow_at:
            open(grow_file, "w").close()
        if state.step == steps - 1 and hvd.size() < want_size and time.monotonic() < deadline:
            time.sleep(0.1)
            state.commit()  # raises HostsUpdatedInterrupt once the new workers are in
            continue
        if show_steps:
            print(f"worker {me} at step {state.step}", flush=True)
        model.step(state)
        state.sizes.append(hvd.size())
        state.step += 1
        state.commit()
        time.sleep(float(os.environ.get("STEP_SLEEP", "0.02")))


state = model.state(step=0, sizes=[])
state.register_reset_callbacks([lambda: resets.append(hvd.size())])
train(state)
gathered = hvd.allgather_object(model.weights(state))
print(f"worker {me}: rank {hvd.rank()} of {hvd.size()}, steps {state.step}, "
      f"sizes {sorted(set(state.sizes))}, resets {resets}, "
      f"identical {all(np.array_equal(w, gathered[0]) for w in gathered)}", flush=True)
