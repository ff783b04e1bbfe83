"""hvd.torch on CUDA tensors, against CPU references: one rank per GPU goes through NCCL, ranks
sharing a GPU through host staging (the engine picks; both must give the same results).
Skipped, with the reason, where torch sees no GPU or hvd was built without CUDA."""
import json
import os

import pytest
import torch

import hvd.torch as hvd

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and hvd.cuda_built()),
    reason="needs a CUDA device and hvd built with CUDA and NCCL")


def device():
    return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())


def ranked(shape, rank, dtype=torch.float32):
    g = torch.Generator().manual_seed(100 + rank)
    return (torch.randn(*shape, generator=g) * 10).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64,
                                   torch.int32, torch.int64, torch.int16, torch.uint16,
                                   torch.uint8])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Max, hvd.Min])
def test_allreduce_matches_cpu(dtype, op):
    n, r = hvd.size(), hvd.rank()
    parts = [ranked((33, 5), k, dtype) for k in range(n)]
    expected = parts[0].double()
    for p in parts[1:]:
        expected = {hvd.Sum: expected + p.double(), hvd.Max: torch.maximum(expected, p.double()),
                    hvd.Min: torch.minimum(expected, p.double())}[op]
    if dtype in (torch.uint8, torch.uint16) and op == hvd.Sum:
        expected = torch.remainder(expected, 256 if dtype == torch.uint8 else 65536)
    x = parts[r].to(device())
    out = hvd.allreduce(x, op=op, name=f"cuda.ar.{dtype}.{op}")
    assert out.device == x.device and out.dtype == dtype
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1}.get(dtype, 1e-6)
    assert torch.allclose(out.cpu().double(), expected, rtol=tol, atol=tol * 10)


def test_average_and_scale_factors_in_place():
    n, r = hvd.size(), hvd.rank()
    x = torch.full((1000,), float(r + 1), device=device())
    hvd.allreduce_(x, op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5,
                   name="cuda.avg_scaled")
    assert torch.all(x.cpu() == (n + 1) / 2)


def test_collectives_wait_for_the_producing_stream():
    # The input is written by a long kernel on a side stream; the collective must see its end.
    side = torch.cuda.Stream(device())
    with torch.cuda.stream(side):
        a = torch.ones(4096, 4096, device=device())
        for _ in range(20):
            a = a @ torch.eye(4096, device=device())
        x = a[0, :8].contiguous() * (hvd.rank() + 1)
        out = hvd.allreduce(x, op=hvd.Sum, name="cuda.stream_order")
    n = hvd.size()
    assert torch.all(out.cpu() == n * (n + 1) / 2)


def test_allgather_broadcast_alltoall_reducescatter():
    n, r = hvd.size(), hvd.rank()
    x = torch.full((r + 1, 3), float(r), device=device())
    g = hvd.allgather(x, name="cuda.gather")
    assert g.device == x.device
    assert torch.equal(g.cpu(), torch.cat([torch.full((k + 1, 3), float(k)) for k in range(n)]))
    b = torch.full((5,), float(r), device=device())
    hvd.broadcast_(b, root_rank=n - 1, name="cuda.bcast")
    assert torch.all(b.cpu() == n - 1)
    splits = torch.tensor([k + 1 for k in range(n)])
    send = torch.cat([torch.full((k + 1, 2), 10.0 * r + k) for k in range(n)]).to(device())
    out, received = hvd.alltoall(send, splits=splits, name="cuda.a2a")
    assert received.tolist() == [r + 1] * n
    assert torch.equal(out.cpu(), torch.cat([torch.full((r + 1, 2), 10.0 * k + r)
                                             for k in range(n)]))
    rows = 2 * n + 1
    full = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2)
    part = hvd.reducescatter((full + r).to(device()), op=hvd.Sum, name="cuda.rs")
    starts = [0]
    for k in range(n):
        starts.append(starts[-1] + rows // n + (1 if k < rows % n else 0))
    expected = (full * n + sum(range(n)))[starts[r]:starts[r + 1]]
    assert torch.equal(part.cpu(), expected)


def test_grouped_allreduce_of_many_small_tensors():
    n, r = hvd.size(), hvd.rank()
    ts = [torch.full((k + 1,), float(r + k), device=device()) for k in range(50)]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="cuda.grouped")
    for k, o in enumerate(outs):
        assert torch.all(o.cpu() == sum(q + k for q in range(n)))


def test_distributed_optimizer_on_a_cuda_model_keeps_ranks_identical():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3)).to(device())
    reference = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 3))
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    n, r = hvd.size(), hvd.rank()
    for step in range(5):
        batches = [ranked((4, 6), 1000 * step + k) for k in range(n)]
        labels = [torch.randint(0, 3, (4,), generator=torch.Generator().manual_seed(step * 10 + k))
                  for k in range(n)]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(batches[r].to(device())),
                                          labels[r].to(device())).backward()
        opt.step()
        ref_opt.zero_grad()
        # Averaged gradients of per-rank mean losses = gradient of the mean of those losses.
        sum(torch.nn.functional.cross_entropy(reference(b), y)
            for b, y in zip(batches, labels)).div(n).backward()
        ref_opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="cuda.opt.params")
    assert all(torch.equal(gathered[0], gathered[k]) for k in range(n))
    ref = torch.cat([p.detach().flatten() for p in reference.parameters()])
    assert torch.allclose(flat.cpu(), ref, atol=1e-5)


def test_fp16_compression_casts_on_the_gpu_and_restores_the_dtype():
    n, r = hvd.size(), hvd.rank()
    x = (ranked((257, 3), r) / 10).to(device())
    compressed, ctx = hvd.Compression.fp16.compress(x)
    # The cast is a kernel on the tensor's device: nothing visits host memory.
    assert compressed.device == x.device and compressed.dtype == torch.float16
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16, name="cuda.fp16")
    assert out.device == x.device and out.dtype == torch.float32
    expected = sum((ranked((257, 3), k) / 10).half().float() for k in range(n))
    assert torch.allclose(out.cpu(), expected, rtol=2e-3, atol=2e-2)
    # Through DistributedOptimizer as well: ranks stay identical.
    torch.manual_seed(1)
    model = torch.nn.Linear(8, 2).to(device())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16)
    for step in range(3):
        opt.zero_grad()
        model(ranked((4, 8), 50 * step + r).to(device())).square().mean().backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="cuda.fp16.params")
    assert all(torch.equal(gathered[0], gathered[k]) for k in range(n))


def test_sync_batch_norm_on_cuda_matches_batch_norm_over_the_whole_batch():
    n, r = hvd.size(), hvd.rank()
    parts = [ranked((4, 3, 5, 5), 300 + k) for k in range(n)]
    weights = torch.linspace(-1, 1, 4 * 3 * 5 * 5).view(4, 3, 5, 5)
    sbn = hvd.SyncBatchNorm(3).to(device())
    x = parts[r].to(device()).requires_grad_()
    out = sbn(x)
    assert out.device == x.device
    (out * weights.to(device())).sum().backward()
    # One BatchNorm over every rank's batch; the loss sums every rank's part.
    ref_bn = torch.nn.BatchNorm2d(3)
    whole = torch.cat(parts).requires_grad_()
    ref = ref_bn(whole)
    (ref * weights.repeat(n, 1, 1, 1)).sum().backward()
    mine = slice(4 * r, 4 * (r + 1))
    assert torch.allclose(out.detach().cpu(), ref[mine].detach(), atol=1e-4)
    assert torch.allclose(x.grad.cpu(), whole.grad[mine], atol=1e-4)
    assert torch.allclose(sbn.running_mean.cpu(), ref_bn.running_mean, atol=1e-5)
    assert torch.allclose(sbn.running_var.cpu(), ref_bn.running_var, atol=1e-4)


def test_timeline_shows_the_gpu_phases(tmp_path):
    path = os.path.join(os.environ.get("HVD_TEST_TMP", str(tmp_path)), "cuda_timeline.json")
    path = hvd.broadcast_object(path, root_rank=0, name="cuda.timeline.path")
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(100, device=device()), name="cuda.timeline.tensor")
    hvd.stop_timeline()
    if hvd.rank() == 0:
        with open(path) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        rows = {e["tid"] for e in events if e.get("ph") == "M"
                and e.get("args", {}).get("name") == "allreduce.cuda.timeline.tensor"}
        phases = {e["name"] for e in events if e.get("ph") == "X" and e.get("tid") in rows}
        backend = "NCCL_" if hvd.size() == 1 else "STAGED_"  # one GPU: several ranks share it
        assert any(str(p).startswith(backend + "ALLREDUCE") for p in phases), phases
    hvd.barrier()
