"""hvd.torch collectives against references, including autograd gradients (of the sum of
every rank's loss, see hvd/torch/mpi_ops.py)."""
import pytest
import torch

import hvd.torch as hvd

DTYPES = [torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]


def data(rank, shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n) % 5) + rank + 1).to(dtype).reshape(shape)


def all_data(shape, dtype=torch.float64):
    return torch.stack([data(r, shape, dtype) for r in range(hvd.size())])


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_every_dtype(dtype):
    out = hvd.allreduce(data(hvd.rank(), (4, 3), dtype), op=hvd.Sum)
    assert out.dtype == dtype and out.shape == (4, 3)
    expected = all_data((4, 3)).sum(0)
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=0)


@pytest.mark.parametrize("op", ["Average", "Min", "Max", "Product"])
def test_allreduce_ops(op):
    x = data(hvd.rank(), (6,), torch.float64)
    ref = {"Average": lambda t: t.mean(0), "Min": lambda t: t.min(0).values,
           "Max": lambda t: t.max(0).values, "Product": lambda t: t.prod(0)}[op]
    torch.testing.assert_close(hvd.allreduce(x, op=getattr(hvd, op)), ref(all_data((6,))))


def test_allreduce_in_place_async_poll_synchronize():
    x = data(hvd.rank(), (5,))
    h = hvd.allreduce_async_(x, op=hvd.Sum, name="t.inplace")
    out = hvd.synchronize(h)
    assert out is x
    torch.testing.assert_close(x.double(), all_data((5,)).sum(0))
    h = hvd.allreduce_async(torch.ones(2), average=True)
    while not hvd.poll(h):
        pass
    torch.testing.assert_close(hvd.synchronize(h), torch.ones(2))
    y = torch.ones(3)
    assert hvd.allreduce_(y, op=hvd.Sum) is y and y.tolist() == [hvd.size()] * 3


def test_scale_factors():
    x = torch.ones(4, dtype=torch.float64)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.25, postscale_factor=2.0)
    torch.testing.assert_close(out, torch.full((4,), 0.5 * hvd.size(), dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_scale_factors_round_as_the_frameworks_multiply(dtype):
    # Floats are scaled in their own precision with the factor rounded to it, integers in
    # double: the bits of `factor * tensor` in torch, which Horovod's tests compare exactly
    # (float32 scaled in double used to be one ulp off).
    factor = 0.7130341301  # not representable in float32
    x = (torch.arange(-40, 40) * 1.37).to(dtype)
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=factor, name=f"scale.{dtype}")
    if dtype.is_floating_point:
        scaled = x * torch.tensor(factor, dtype=dtype)
    else:
        scaled = (x.to(torch.float64) * factor).to(dtype)
    if hvd.size() <= 3:  # sums of 2 or 3 equal terms round as a multiplication does
        assert torch.equal(out, scaled * hvd.size())


def test_sparse_tensors_other_devices_and_scalar_allgathers_are_value_errors():
    with pytest.raises(ValueError, match=r'allreduce "s": torch.sparse_coo tensors .*to_dense'):
        hvd.allreduce(torch.ones(3).to_sparse(), name="s")
    with pytest.raises(ValueError, match=r'allgather "m": tensor on device meta'):
        hvd.allgather(torch.ones(3, device="meta"), name="m")
    with pytest.raises(ValueError, match=r'allgather "loss": cannot concatenate scalars'):
        hvd.allgather(torch.tensor(1.0), name="loss")
    # the job goes on: nothing was submitted
    torch.testing.assert_close(hvd.allgather(torch.tensor([1.0]), name="loss"),
                               torch.ones(hvd.size()))


def test_non_contiguous_in_place_and_unsupported_dtypes_are_value_errors():
    x = torch.zeros(4, 4).t()
    with pytest.raises(ValueError, match='allreduce_ "grad.t".*non-contiguous'):
        hvd.allreduce_(x, name="grad.t")
    torch.testing.assert_close(hvd.allreduce(x, op=hvd.Sum), torch.zeros(4, 4))
    with pytest.raises(ValueError, match='allreduce "z".*unsupported dtype'):
        hvd.allreduce(torch.zeros(2, dtype=torch.complex64), name="z")
    with pytest.raises(ValueError, match='allreduce "u".*unsupported dtype uint32'):
        hvd.allreduce(torch.zeros(2, dtype=torch.uint32), name="u")
    with pytest.raises(ValueError, match='broadcast "f8".*unsupported dtype float8_e4m3fn'):
        hvd.broadcast(torch.zeros(2, dtype=torch.float8_e4m3fn), root_rank=0, name="f8")
    if hvd.size() & (hvd.size() - 1) == 0:
        torch.testing.assert_close(hvd.allreduce(torch.ones(2), op=hvd.Adasum), torch.ones(2))
    else:
        with pytest.raises(ValueError, match="adasum needs a power-of-two number of ranks"):
            hvd.allreduce(torch.ones(2), op=hvd.Adasum)


def test_lazy_negation_views_keep_their_sign_and_nested_tensors_are_refused():
    # .imag of a conjugated complex tensor is a view with torch's negative bit: its stored
    # values are the unnegated ones, and DLPack would carry those.
    z = torch.complex(torch.zeros(3), torch.full((3,), float(hvd.rank() + 1))).conj()
    neg = z.imag
    assert neg.is_neg()
    expected = -torch.full((3,), float(sum(range(1, hvd.size() + 1))))
    torch.testing.assert_close(hvd.allreduce(neg, op=hvd.Sum, name="neg"), expected)
    torch.testing.assert_close(hvd.allreduce(neg, op=hvd.Min, name="neg.min"),
                               torch.full((3,), -float(hvd.size())))
    torch.testing.assert_close(hvd.allgather(neg, name="neg.g")[:3], torch.full((3,), -1.0))
    # In place: .imag is strided, so refused as non-contiguous; a contiguous negative view (as
    # torch makes internally) is refused for its sign.
    contiguous_neg = torch._neg_view(torch.ones(3))
    torch.testing.assert_close(hvd.allreduce(contiguous_neg, op=hvd.Sum, name="neg.c"),
                               torch.full((3,), -float(hvd.size())))
    with pytest.raises(ValueError, match=r'allreduce_ "neg.i": in-place .* negative bit'):
        hvd.allreduce_(contiguous_neg, name="neg.i")
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
    with pytest.raises(ValueError, match=r'allreduce "nt": .*(nested|jagged)'):
        hvd.allreduce(nested, name="nt")


def test_an_in_place_collective_on_a_tensor_saved_for_backward_is_caught_by_autograd():
    w = torch.ones(3, requires_grad=True)
    h = torch.full((3,), 2.0, requires_grad=True) * 1.0  # saved by the product below
    loss = (h * w).sum()
    hvd.allreduce_(h.detach(), op=hvd.Sum, name="saved")  # detach shares the version counter
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_grouped_allreduce_fp16_compression():
    xs = [data(hvd.rank(), (i + 2,)) for i in range(4)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, compression=hvd.Compression.fp16)
    for i, out in enumerate(outs):
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.double(), all_data((i + 2,)).sum(0))
    compressed, ctx = hvd.Compression.fp16.compress(xs[0])
    assert compressed.dtype == torch.float16
    assert hvd.Compression.fp16.decompress(compressed, ctx).dtype == torch.float32
    ints = torch.ones(2, dtype=torch.int32)
    assert hvd.Compression.fp16.compress(ints)[0].dtype == torch.int32
    out = hvd.allreduce(torch.full((3,), 0.5), op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32 and out.tolist() == [0.5 * hvd.size()] * 3
    ys = [torch.ones(2), torch.ones(3)]
    hvd.grouped_allreduce_(ys, op=hvd.Sum)
    assert ys[1].tolist() == [hvd.size()] * 3


def test_allgather_broadcast_alltoall_reducescatter():
    n, r = hvd.size(), hvd.rank()
    g = hvd.allgather(torch.full((r + 1, 2), r, dtype=torch.int64))
    assert g.shape == (n * (n + 1) // 2, 2)
    assert g[:, 0].tolist() == [s for s in range(n) for _ in range(s + 1)]
    outs = hvd.grouped_allgather([torch.tensor([r]), torch.tensor([[r, r]])])
    assert outs[0].tolist() == list(range(n)) and outs[1].shape == (n, 2)
    b = hvd.broadcast(torch.tensor([r, r]), n - 1)
    assert b.tolist() == [n - 1] * 2
    t = torch.tensor([r])
    hvd.broadcast_(t, 0)
    assert t.tolist() == [0]
    out, received = hvd.alltoall(torch.arange(n) + 10 * r, splits=[1] * n)
    assert out.tolist() == [10 * s + r for s in range(n)] and received.tolist() == [1] * n
    assert hvd.alltoall(torch.arange(2 * n)).shape == (2 * n,)
    rs = hvd.reducescatter(torch.ones(2 * n, 3), op=hvd.Sum)
    assert rs.shape == (2, 3) and rs.flatten().tolist() == [float(n)] * 6
    assert hvd.reducescatter(torch.ones(n), op=hvd.Average).tolist() == [1.0]
    gr = hvd.grouped_reducescatter([torch.ones(n), torch.ones(2 * n)], op=hvd.Sum)
    assert gr[0].tolist() == [n] and gr[1].tolist() == [n, n]
    h = hvd.allgather_async(torch.tensor([r]))
    assert hvd.synchronize(h).tolist() == list(range(n))
    h = hvd.broadcast_async_(torch.tensor([r]), 0)
    assert hvd.synchronize(h).tolist() == [0]
    h = hvd.alltoall_async(torch.arange(n))
    assert hvd.synchronize(h).tolist() == [r] * n
    h = hvd.reducescatter_async(torch.ones(n), op=hvd.Sum)
    assert hvd.synchronize(h).tolist() == [n]


def test_positional_arguments_follow_horovod():
    n = hvd.size()
    # horovod.torch's order: reducescatter(tensor, name, compression, op, ...).
    assert hvd.reducescatter(torch.ones(n), "rs.pos", hvd.Compression.none,
                             hvd.Sum).tolist() == [n]
    assert hvd.synchronize(hvd.reducescatter_async(torch.ones(n), "rs.pos.a")).tolist() == [1.0]
    assert hvd.grouped_reducescatter([torch.ones(n)], "grs.pos")[0].tolist() == [1.0]
    # A value given by position to the wrong parameter is named, not a TypeError from the core.
    with pytest.raises(ValueError, match=r"reducescatter: name must be a string, got "
                                         r"int .*keyword"):
        hvd.reducescatter(torch.ones(n), hvd.Sum)
    with pytest.raises(ValueError, match="allgather: name must be a string, got int 3"):
        hvd.allgather(torch.ones(1), 3)


# -- autograd -----------------------------------------------------------------------------------
def test_allreduce_gradient():
    x = data(hvd.rank(), (3,), torch.float64).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Average, name="ag.avg")
    (y * y).sum().backward()
    # L = sum_r sum(y^2), y = mean(x): dL/dx_me = sum_r 2y/n = 2y
    torch.testing.assert_close(x.grad, 2 * all_data((3,)).mean(0))


def test_grouped_allreduce_gradient():
    a = torch.ones(2, dtype=torch.float64, requires_grad=True)
    b = torch.ones(3, dtype=torch.float64, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    (ya.sum() + 2 * yb.sum()).backward()
    n = hvd.size()
    assert a.grad.tolist() == [n] * 2 and b.grad.tolist() == [2 * n] * 3


def test_allgather_gradient():
    r, n = hvd.rank(), hvd.size()
    x = torch.full((r + 1, 2), 1.0, dtype=torch.float64, requires_grad=True)
    g = hvd.allgather(x, name="ag.gather")
    weights = torch.arange(g.shape[0], dtype=torch.float64).unsqueeze(1)
    (g * weights).sum().backward()
    offset = r * (r + 1) // 2
    expected = n * torch.arange(offset, offset + r + 1, dtype=torch.float64)
    torch.testing.assert_close(x.grad, expected.unsqueeze(1).expand(r + 1, 2))


def test_broadcast_gradient():
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    hvd.broadcast(x, 0, name="ag.bcast").sum().backward()
    expected = float(hvd.size()) if hvd.rank() == 0 else 0.0
    assert x.grad.tolist() == [expected] * 3


def test_alltoall_gradient():
    n, r = hvd.size(), hvd.rank()
    x = torch.ones(n, dtype=torch.float64, requires_grad=True)
    out, _ = hvd.alltoall(x, splits=[1] * n, name="ag.a2a")
    # output row s came from rank s; weight it by s
    (out * torch.arange(n, dtype=torch.float64)).sum().backward()
    # row j of x went to rank j, which weighted it by this rank's index r
    assert x.grad.tolist() == [float(r)] * n


def test_reducescatter_gradient():
    n = hvd.size()
    x = torch.ones(2 * n, dtype=torch.float64, requires_grad=True)
    y = hvd.reducescatter(x, op=hvd.Average, name="ag.rs")
    (y * (hvd.rank() + 1)).sum().backward()
    # part p of every x goes (averaged) to rank p, weighted p+1
    expected = torch.tensor([p + 1 for p in range(n) for _ in range(2)], dtype=torch.float64) / n
    torch.testing.assert_close(x.grad, expected)


def test_grouped_allgather_gradient():
    r, n = hvd.rank(), hvd.size()
    a = torch.ones(r + 1, dtype=torch.float64, requires_grad=True)
    b = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    ga, gb = hvd.grouped_allgather([a, b], name="ag.ggather")
    assert ga.shape == (n * (n + 1) // 2,) and gb.shape == (2 * n, 3)
    (ga * torch.arange(ga.shape[0], dtype=torch.float64)).sum().backward(inputs=[a])
    offset = r * (r + 1) // 2
    torch.testing.assert_close(a.grad, n * torch.arange(offset, offset + r + 1,
                                                        dtype=torch.float64))
    assert b.grad is None  # gb took no part in the loss


def test_grouped_reducescatter_gradient():
    n, r = hvd.size(), hvd.rank()
    a = torch.ones(2 * n, dtype=torch.float64, requires_grad=True)
    b = torch.ones(n, 2, dtype=torch.float64, requires_grad=True)
    ya, yb = hvd.grouped_reducescatter([a, b], op=hvd.Sum, name="ag.grs", prescale_factor=0.5)
    (ya * (r + 1) + 0 * yb.sum()).sum().backward()
    # part p of every a goes to rank p, halved, weighted p+1; b's gradient is zero
    expected = torch.tensor([(p + 1) / 2 for p in range(n) for _ in range(2)],
                            dtype=torch.float64)
    torch.testing.assert_close(a.grad, expected)
    assert b.grad.abs().sum().item() == 0


def test_alltoall_refuses_float_splits_on_every_rank():
    # A float tensor made with torch.empty holds different garbage on each rank; converted to
    # integers it made the ranks disagree on the splits and wait on each other.
    n = hvd.size()
    for splits in (torch.empty(n, dtype=torch.float32), torch.ones(n), [1.0] * n):
        with pytest.raises(ValueError, match="splits must be integers"):
            hvd.alltoall(torch.ones(n), splits, name="a2a.float_splits")
    out = hvd.alltoall(torch.ones(n), torch.ones(n, dtype=torch.int64), name="a2a.after")
    assert out[0].tolist() == [1.0] * n  # nothing was left half-submitted


def test_alltoall_received_splits_are_int32_as_in_horovod():
    n = hvd.size()
    _, received = hvd.alltoall(torch.ones(n), splits=[1] * n, name="a2a.splits_dtype")
    assert received.dtype == torch.int32 and received.tolist() == [1] * n


def test_gradient_of_max_is_refused():
    x = torch.ones(2, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Max, name="ag.max")
    with pytest.raises(RuntimeError, match="Max is not defined"):
        y.sum().backward()


# -- errors and objects -------------------------------------------------------------------------
def test_shape_mismatch_arrives_as_an_exception_on_every_rank():
    shape = (2,) if hvd.rank() == 0 else (3,)
    with pytest.raises(hvd.HorovodInternalError, match='allreduce "t.shape": shape mismatch'):
        hvd.allreduce(torch.zeros(shape), name="t.shape")
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    with pytest.raises(hvd.HorovodInternalError, match="reduce op"):
        hvd.allreduce(torch.zeros(2), op=op, name="t.op")
    root = 0 if hvd.rank() == 0 else 1
    with pytest.raises(hvd.HorovodInternalError, match="root"):
        hvd.broadcast(torch.zeros(2), root, name="t.root")


def test_objects_and_barrier():
    hvd.barrier()
    state = {"epoch": 3, "rank": hvd.rank(), "t": torch.arange(3)}
    got = hvd.broadcast_object(state, root_rank=0)
    assert got["rank"] == 0 and got["t"].tolist() == [0, 1, 2]
    assert hvd.allgather_object(f"r{hvd.rank()}") == [f"r{r}" for r in range(hvd.size())]


def test_join_returns_the_last_rank():
    last = hvd.size() - 1
    if hvd.rank() == last:
        out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="t.after.join")
        assert out.tolist() == [1.0] * 3
    assert hvd.join() == last


def test_unnamed_allgathers_while_a_rank_is_joined_fail_at_once_every_round():
    # Horovod's test_horovod_join_allgather: each rank in turn joins first while the others
    # allgather (unnamed). From the second round on the ranks' unnamed allgathers carry other
    # names (they did not all allgather in the first), so waiting for the other ranks to
    # submit "the same" one hung until the stall shutdown; each fails at once now.
    import time
    t = torch.ones(5, 5)
    for first in range(hvd.size()):
        if hvd.rank() != first:
            started = time.monotonic()
            with pytest.raises(hvd.HorovodInternalError, match="only allreduce can run while "
                                                               "ranks are joined"):
                hvd.allgather(t)
            assert time.monotonic() - started < 10
        hvd.join()
        assert hvd.allgather_object(first) == [first] * hvd.size()


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_sparse_allreduce_async_adds_the_ranks_entries(op):
    n, r = hvd.size(), hvd.rank()
    # each rank sets row r and the shared row 9; rank 1 sends nothing at all
    rows = [] if r == 1 else [r, 9]
    values = torch.full((len(rows), 2), float(r + 1))
    sparse = torch.sparse_coo_tensor(torch.tensor([rows], dtype=torch.int64), values, (10, 2),
                                     check_invariants=True)
    handle = hvd.sparse_allreduce_async(sparse, name=f"sparse.{op}", op=getattr(hvd, op))
    out = handle()
    assert out.is_sparse and out.is_coalesced() and out.shape == (10, 2)
    expected = torch.zeros(10, 2)
    for k in range(n):
        if k != 1:
            expected[k] += k + 1
            expected[9] += k + 1
    if op == "Average":
        expected /= n
    torch.testing.assert_close(out.to_dense(), expected)


def test_sparse_allreduce_async_refuses_dense_tensors_and_other_ops():
    with pytest.raises(ValueError, match='sparse_allreduce_async "d": takes a torch.sparse_coo'):
        hvd.sparse_allreduce_async(torch.ones(3), name="d", op=hvd.Sum)
    with pytest.raises(ValueError, match='"m": op must be hvd.Average or hvd.Sum'):
        hvd.sparse_allreduce_async(torch.ones(3).to_sparse(), name="m", op=hvd.Max)
