"""The training script of the elastic end-to-end tests: a small torch model trained for a fixed
number of steps through hvd.elastic.run, with hooks the tests steer through the environment:

  CRASH_WORKER=N, CRASH_AT=S  worker N dies (exit 3) at step S, once (CRASH_MARKER records it)
  GROW_FILE=F, GROW_AT=S      rank 0 creates F at step S (the discovery script then offers more)
  WANT_SIZE=K                 the last step waits (up to 90 s) until the job has K workers
  START_CRASH_WORKER=N        worker N exits before hvd.init(), after START_CRASH_DELAY s
  SHOW_HOST=1                 each worker prints the network namespace it runs in

It prints, per worker, the step count, the sizes it trained at and a checksum of the weights.
"""
import os
import sys
import time

if os.environ.get("START_CRASH_WORKER") == os.environ["HVD_WORKER_ID"]:
    time.sleep(float(os.environ.get("START_CRASH_DELAY", "0")))
    sys.exit(f"worker {os.environ['HVD_WORKER_ID']}: this host lacks something")

import torch

if os.environ.get("USE_HOROVOD_COMPAT"):
    import horovod.torch as hvd
else:
    import hvd.torch as hvd

hvd.init()
if os.environ.get("SHOW_HOST"):
    print(f"worker {os.environ['HVD_WORKER_ID']} runs on {os.readlink('/proc/self/ns/net')}",
          flush=True)
torch.manual_seed(1)
model = torch.nn.Linear(4, 1)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     named_parameters=model.named_parameters())
me = int(os.environ["HVD_WORKER_ID"])
steps = int(os.environ.get("STEPS", "30"))
crash_worker = int(os.environ.get("CRASH_WORKER", "-1"))
crash_at = int(os.environ.get("CRASH_AT", "-1"))
marker = os.environ.get("CRASH_MARKER", "")
grow_file = os.environ.get("GROW_FILE", "")
grow_at = int(os.environ.get("GROW_AT", "-1"))
want_size = int(os.environ.get("WANT_SIZE", "0"))
resets = []


@hvd.elastic.run
def train(state):
    deadline = time.monotonic() + 90
    while state.step < steps:
        if me == crash_worker and state.step == crash_at and not os.path.exists(marker):
            open(marker, "w").close()
            print(f"worker {me} dies at step {state.step}", flush=True)
            os._exit(3)
        if hvd.rank() == 0 and grow_file and state.step == grow_at:
            open(grow_file, "w").close()
        if state.step == steps - 1 and hvd.size() < want_size and time.monotonic() < deadline:
            time.sleep(0.1)
            state.commit()  # raises HostsUpdatedInterrupt once the new workers are in
            continue
        # Every rank's batch depends on the step only, so the result does not depend on which
        # workers ran which step: the same steps give the same weights.
        g = torch.Generator().manual_seed(state.step * 1000 + hvd.rank())
        x = torch.randn(8, 4, generator=g)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        state.sizes.append(hvd.size())
        state.step += 1
        state.commit()
        time.sleep(float(os.environ.get("STEP_SLEEP", "0.02")))


state = hvd.elastic.TorchState(model, optimizer, step=0, sizes=[])
state.register_reset_callbacks([lambda: resets.append(hvd.size())])
train(state)
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = hvd.allgather(weights.unsqueeze(0))
print(f"worker {me}: rank {hvd.rank()} of {hvd.size()}, steps {state.step}, "
      f"sizes {sorted(set(state.sizes))}, resets {resets}, "
      f"identical {bool((gathered == gathered[0]).all())}", flush=True)
