"""The Keras script of the elastic end-to-end tests: model.fit through hvd.elastic.run with
Horovod's elastic callbacks. CRASH_WORKER=N makes worker N exit (code 3) at the start of epoch
2, once (CRASH_MARKER records it). GROW_FILE=F: rank 0 creates F at the start of epoch 1 (the
discovery script then offers more), and epoch 3 waits (up to 90 s, committing) until the job has
WANT_SIZE workers."""
import os
import time

import numpy as np
import keras

import hvd.tensorflow.keras as hvd

hvd.init()
me = int(os.environ["HVD_WORKER_ID"])
crash_worker = int(os.environ.get("CRASH_WORKER", "-1"))
grow_file = os.environ.get("GROW_FILE", "")
want_size = int(os.environ.get("WANT_SIZE", "0"))
marker = os.environ.get("CRASH_MARKER", "")
rng = np.random.RandomState(hvd.rank())
x = rng.randn(128, 4).astype("float32")
y = x.sum(axis=1, keepdims=True)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse",
              jit_compile=False)
state = hvd.elastic.KerasState(model, batch=0, epoch=0)
sizes = []


class Crash(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        sizes.append(hvd.size())
        if me == crash_worker and epoch == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            print(f"worker {me} dies at epoch {epoch}", flush=True)
            os._exit(3)
        if grow_file and epoch == 1 and hvd.rank() == 0:
            open(grow_file, "w").close()
        deadline = time.monotonic() + 90
        while epoch == 3 and hvd.size() < want_size and time.monotonic() < deadline:
            time.sleep(0.1)
            state.commit()  # raises HostsUpdatedInterrupt once the new workers are in


callbacks = [Crash(), hvd.elastic.UpdateBatchStateCallback(state),
             hvd.elastic.UpdateEpochStateCallback(state),
             hvd.elastic.CommitStateCallback(state, batches_per_commit=3)]


@hvd.elastic.run
def train(state):
    model.fit(x, y, batch_size=16, initial_epoch=state.epoch, epochs=5, callbacks=callbacks,
              verbose=0)


train(state)
weights = np.concatenate([v.numpy().ravel() for v in model.variables])
gathered = np.asarray(hvd.allgather(weights[None]))  # a tf.Tensor, as Horovod's
print(f"worker {me}: rank {hvd.rank()} of {hvd.size()}, epoch {state.epoch}, "
      f"sizes {sorted(set(sizes))}, identical {bool((gathered == gathered[0]).all())}",
      flush=True)
