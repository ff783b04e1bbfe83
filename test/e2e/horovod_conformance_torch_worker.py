"""One rank of the conformance comparison: runs Horovod API calls through `horovod.torch`
(Horovod itself, or hvd's compatibility package) and records what each returned
(conformance_results.py). Every case is deterministic and the same on both libraries."""
import os
import sys

import torch

import horovod.torch as hvd
from conformance_results import Results  # this directory


def torch_values(x):
    if not isinstance(x, torch.Tensor):
        return None
    t = x.detach()
    return str(t.dtype), t.shape, t.to(torch.float64).flatten().tolist()


results = Results(torch_values)
record = results.record


def ramp(shape, dtype, offset=0):
    """Values that differ per rank and per element, exact in every dtype used here."""
    n = 1
    for d in shape:
        n *= d
    t = (torch.arange(n, dtype=torch.float64) % 5) + hvd.rank() + 1 + offset
    return t.reshape(shape).to(dtype)


WITH_SETS = os.environ.get("WITH_SETS") == "1"
process_sets = [hvd.ProcessSet([0, 2])] if WITH_SETS else None
hvd.init(process_sets=process_sets)
torch.manual_seed(0)
size, rank = hvd.size(), hvd.rank()

# horovod.torch's public names (Horovod 0.28.1's dir(), less its C extension's internals)
HOROVOD_TORCH_NAMES = """Adasum Average Compression DistributedOptimizer HorovodInternalError Max
Min ProcessSet Product Sum SyncBatchNorm add_process_set allgather allgather_async
allgather_object allreduce allreduce_ allreduce_async allreduce_async_ alltoall alltoall_async
barrier broadcast broadcast_ broadcast_async broadcast_async_ broadcast_object
broadcast_optimizer_state broadcast_parameters ccl_built compression cross_rank cross_size
cuda_built ddl_built elastic functions global_process_set gloo_built gloo_enabled
grouped_allgather grouped_allgather_async grouped_allreduce grouped_allreduce_
grouped_allreduce_async grouped_allreduce_async_ grouped_reducescatter grouped_reducescatter_async
init is_initialized join local_rank local_size mpi_built mpi_enabled mpi_ops
mpi_threads_supported nccl_built optimizer poll rank reducescatter reducescatter_async
remove_process_set rocm_built shutdown size sparse_allreduce_async start_timeline stop_timeline
sync_batch_norm synchronize""".split()


def api_names():
    from horovod.common.process_sets import ProcessSet  # noqa: F401
    from horovod.common.exceptions import HorovodInternalError  # noqa: F401
    return [n for n in HOROVOD_TORCH_NAMES if not hasattr(hvd, n)]


record("api.missing_names", api_names)
record("basics", lambda: [size, rank, hvd.local_size(), hvd.local_rank(), hvd.cross_size(),
                          hvd.cross_rank(), hvd.is_initialized()])

# allreduce: every op and dtype Horovod's Gloo path takes
dtypes = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8, "int8": torch.int8}
results.record_allreduce_matrix(hvd, ramp, dtypes)
record("allreduce.scaled", lambda: hvd.allreduce(ramp((6,), torch.float32), op=hvd.Sum,
                                                 prescale_factor=0.5, postscale_factor=3.0))
record("allreduce.average_flag", lambda: hvd.allreduce(ramp((4,), torch.float32), average=False))
record("allreduce.fp16_compression",
       lambda: hvd.allreduce(ramp((5,), torch.float32), compression=hvd.Compression.fp16))


def inplace():
    t = ramp((2, 3), torch.float32)
    out = hvd.allreduce_(t, op=hvd.Sum)
    return [t, out is t]


record("allreduce_.inplace", inplace)
record("allreduce.noncontiguous", lambda: hvd.allreduce(ramp((3, 4), torch.float32).t(),
                                                        op=hvd.Sum))
record("allreduce.empty", lambda: hvd.allreduce(torch.zeros(0, 3), op=hvd.Sum))
record("allreduce.scalar", lambda: hvd.allreduce(torch.tensor(float(rank + 1)), op=hvd.Sum))
record("grouped_allreduce", lambda: hvd.grouped_allreduce(
    [ramp((2,), torch.float32), ramp((3, 2), torch.float32, 1)], op=hvd.Average))


def async_handles():
    handles = [hvd.allreduce_async(ramp((4,), torch.float32, k), op=hvd.Sum, name=f"async.{k}")
               for k in range(3)]
    return [hvd.synchronize(h) for h in reversed(handles)]


record("allreduce_async", async_handles)

# allgather, broadcast
record("allgather.uneven_rows", lambda: hvd.allgather(ramp((rank + 1, 3), torch.float32)))
record("allgather.int64", lambda: hvd.allgather(ramp((2,), torch.int64)))
record("allgather.empty_on_rank0", lambda: hvd.allgather(ramp((0 if rank == 0 else 2, 2),
                                                               torch.float32)))
record("grouped_allgather", lambda: hvd.grouped_allgather(
    [ramp((rank + 1,), torch.float32), ramp((1, 2), torch.int32)]))
record("broadcast.root1", lambda: hvd.broadcast(ramp((2, 2), torch.float32), root_rank=1))


def broadcast_inplace():
    t = ramp((3,), torch.float64)
    hvd.broadcast_(t, root_rank=size - 1)
    return t


record("broadcast_.inplace", broadcast_inplace)

# alltoall, reducescatter
record("alltoall.even", lambda: hvd.alltoall(ramp((2 * size, 2), torch.float32)))
splits = [(rank + j) % 3 + 1 for j in range(size)]
record("alltoall.splits", lambda: hvd.alltoall(ramp((sum(splits), 2), torch.float32),
                                               splits=torch.tensor(splits, dtype=torch.int32)))
record("reducescatter.sum.even", lambda: hvd.reducescatter(ramp((2 * size, 3), torch.float32),
                                                           op=hvd.Sum))
record("reducescatter.average.uneven",
       lambda: hvd.reducescatter(ramp((2 * size + 1, 2), torch.float32), op=hvd.Average))
record("grouped_reducescatter", lambda: hvd.grouped_reducescatter(
    [ramp((size, 2), torch.float32), ramp((size + 1,), torch.float32)], op=hvd.Sum))

# objects and state
record("broadcast_object", lambda: hvd.broadcast_object({"rank": rank, "x": [1, rank]},
                                                        root_rank=1))
record("allgather_object", lambda: hvd.allgather_object({"rank": rank}))


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def broadcast_params():
    net = model()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(rank)
    hvd.broadcast_parameters(net.state_dict(), root_rank=1)
    return [p for p in net.parameters()]


record("broadcast_parameters", broadcast_params)


def train(steps=3, passes=1, groups_of=None, **kwargs):
    net = model()
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    if groups_of:
        kwargs["groups"] = groups_of(list(net.parameters()))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=net.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    for step in range(steps):
        opt.zero_grad()
        for p in range(passes):
            x = ramp((5, 4), torch.float32, step + p) / 10
            net(x).pow(2).sum().backward()
        opt.step()
    return [p for p in net.parameters()]


record("optimizer.default", train)
record("optimizer.passes2", lambda: train(passes=2))
record("optimizer.fp16", lambda: train(compression=hvd.Compression.fp16))
record("optimizer.sum", lambda: train(op=hvd.Sum))
record("optimizer.predivide", lambda: train(gradient_predivide_factor=2.0))
record("optimizer.num_groups", lambda: train(num_groups=2))
record("optimizer.groups", lambda: train(groups_of=lambda params: [params[:2], params[2:]]))


def train_sparse(sparse_as_dense):
    torch.manual_seed(3)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    hvd.broadcast_parameters(emb.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    for step in range(2):
        opt.zero_grad()
        emb(torch.tensor([rank, step + 3, rank + 5])).pow(2).sum().backward()
        opt.step()
    return emb.weight


record("optimizer.sparse", lambda: train_sparse(False))
record("optimizer.sparse_as_dense", lambda: train_sparse(True))


def sparse_allreduce():
    t = torch.sparse_coo_tensor([[rank, 2]], [1.0 + rank, 2.0], (4,), check_invariants=True)
    return hvd.sparse_allreduce_async(t, name="sparse", op=hvd.Sum)().to_dense()


record("sparse_allreduce", sparse_allreduce)


def optimizer_state():
    net = model()
    opt = torch.optim.Adam(net.parameters(), lr=0.01 * (rank + 1))
    net(ramp((2, 4), torch.float32)).sum().backward()
    opt.step()
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = opt.state_dict()
    return [state["param_groups"][0]["lr"]] + [
        state["state"][k]["exp_avg"] for k in sorted(state["state"])]


record("broadcast_optimizer_state", optimizer_state)

# autograd through the collectives


def grad_of(collective, shape):
    x = ramp(shape, torch.float32).requires_grad_()
    y = collective(x)
    weights = torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) + rank
    (y * weights).sum().backward()
    return [y, x.grad]


record("grad.allreduce.sum", lambda: grad_of(lambda x: hvd.allreduce(x, op=hvd.Sum), (3,)))
record("grad.allreduce.average", lambda: grad_of(lambda x: hvd.allreduce(x), (2, 2)))
record("grad.allgather", lambda: grad_of(hvd.allgather, (rank + 1, 2)))
record("grad.broadcast", lambda: grad_of(lambda x: hvd.broadcast(x, root_rank=1), (3,)))
record("grad.reducescatter", lambda: grad_of(lambda x: hvd.reducescatter(x, op=hvd.Sum),
                                             (2 * size, 2)))
record("grad.alltoall", lambda: grad_of(lambda x: hvd.alltoall(x), (size, 2)))
record("grad.reducescatter.average.scaled", lambda: grad_of(
    lambda x: hvd.reducescatter(x, op=hvd.Average, prescale_factor=2.0), (size + 1, 2)))


def grouped_grad_of(collective, shapes):
    xs = [ramp(shape, torch.float32, k).requires_grad_() for k, shape in enumerate(shapes)]
    ys = collective(xs)
    sum((y * (torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) + rank)).sum()
        for y in ys).backward()
    return ys + [x.grad for x in xs]


record("grad.grouped_allgather", lambda: grouped_grad_of(
    hvd.grouped_allgather, [(rank + 1, 2), (2,)]))
record("grad.grouped_reducescatter", lambda: grouped_grad_of(
    lambda xs: hvd.grouped_reducescatter(xs, op=hvd.Sum), [(size, 2), (2 * size + 1,)]))


def sync_batch_norm():
    torch.manual_seed(2)
    bn = hvd.SyncBatchNorm(3, momentum=0.5)
    x = ramp((4, 3, 2), torch.float32).requires_grad_()
    y = bn(x)
    (y * torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape)).sum().backward()
    return [y, x.grad, bn.running_mean, bn.running_var, bn.weight.grad, bn.bias.grad]


record("sync_batch_norm", sync_batch_norm)

# process sets (3 ranks, WITH_SETS=1): a static set {0, 2}
if WITH_SETS and rank in (0, 2):
    record("process_set.allreduce", lambda: hvd.allreduce(
        ramp((3,), torch.float32), op=hvd.Sum, name="ps", process_set=process_sets[0]))
    record("process_set.size_rank", lambda: [process_sets[0].size(), process_sets[0].rank(),
                                             process_sets[0].included()])

# join: rank r submits r extra allreduces, then joins; the others contribute zeros


def uneven():
    outs = [hvd.allreduce(ramp((2,), torch.float32, k), op=hvd.Sum, name=f"join.{k}")
            for k in range(rank)]
    last = hvd.join()
    return outs + [last]


# errors every rank sees: the exception's type is what scripts catch
record("error.shape_mismatch", lambda: hvd.allreduce(torch.ones(rank + 1), name="err.shape"))
record("error.dtype_mismatch", lambda: hvd.allreduce(
    torch.ones(2, dtype=torch.float32 if rank == 0 else torch.float64), name="err.dtype"))
record("error.op_mismatch", lambda: hvd.allreduce(
    torch.ones(2), op=hvd.Sum if rank == 0 else hvd.Max, name="err.op"))
record("error.broadcast_root_mismatch", lambda: hvd.broadcast(
    torch.ones(2), root_rank=rank, name="err.root"))
record("error.alltoall_splits_sum", lambda: hvd.alltoall(
    torch.ones(3), splits=torch.tensor([1] * (size + 1), dtype=torch.int32), name="err.a2a"))
record("join", uneven)
hvd.barrier()

results.write(rank)
hvd.shutdown()
sys.exit(0)
