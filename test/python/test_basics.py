import os

import pytest

import hvd
import hvd.numpy as hnp
import numpy as np


def test_topology_matches_launcher():
    assert hvd.is_initialized()
    assert hvd.rank() == int(os.environ.get("HVD_RANK", 0))
    assert hvd.size() == int(os.environ.get("HVD_SIZE", 1))
    assert hvd.local_rank() == int(os.environ.get("HVD_LOCAL_RANK", 0))
    assert hvd.local_size() == int(os.environ.get("HVD_LOCAL_SIZE", 1))
    assert hvd.cross_rank() == int(os.environ.get("HVD_CROSS_RANK", 0))
    assert hvd.cross_size() == int(os.environ.get("HVD_CROSS_SIZE", 1))
    assert hvd.is_homogeneous() is True


def test_build_queries_are_honest():
    assert hvd.mpi_built() is False and hvd.gloo_built() is False and hvd.rocm_built() is False
    info = hvd._core.build_info()
    # cuda_built and nccl_built say what this build has: CUDA and NCCL come together.
    assert hvd.cuda_built() is info["cuda"] and info["cuda"] == info["nccl"]
    if info["nccl"]:
        version = info["nccl_version"].split()[1]
        major, minor, patch = (int(x) for x in version.split("."))
        assert hvd.nccl_built() == major * 10000 + minor * 100 + patch
    else:
        assert hvd.nccl_built() == 0 and info["cuda_version"] == ""


def test_init_twice_is_a_no_op_and_reinit_after_shutdown_works():
    hvd.init()
    a = np.array([hvd.rank() + 1.0])
    assert hnp.allreduce(a, op=hvd.Sum)[0] == hvd.size() * (hvd.size() + 1) / 2
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not initialised|before hvd.init"):
        hnp.allreduce(a)
    with pytest.raises(ValueError, match="before hvd.init"):
        hvd.rank()
    hvd.init()
    assert hvd.is_initialized()
    assert hnp.allreduce(a, op=hvd.Sum)[0] == hvd.size() * (hvd.size() + 1) / 2


def test_shutdown_drops_outstanding_handles_naming_their_operation():
    a = np.array([hvd.rank() + 1.0])
    total = hvd.size() * (hvd.size() + 1) / 2
    consumed = hnp.allreduce_async(a, op=hvd.Sum, name="before.shutdown.consumed")
    assert hnp.synchronize(consumed)[0] == total
    outstanding = hnp.allreduce_async(a, op=hvd.Sum, name="before.shutdown.outstanding")
    while not hnp.poll(outstanding):  # finished, but never synchronized
        pass
    hvd.shutdown()
    try:
        for call in (hnp.synchronize, hnp.poll):
            with pytest.raises(hvd.HorovodInternalError,
                               match=r'allreduce "before\.shutdown\.outstanding".*hvd\.shutdown'
                                     r'\(\) was called before this handle was synchronized'):
                call(outstanding)
        with pytest.raises(ValueError, match="already consumed"):
            hnp.synchronize(consumed)
    finally:
        hvd.init()
    # The handle stays dropped in the new runtime, which works.
    with pytest.raises(hvd.HorovodInternalError, match="before.shutdown.outstanding"):
        hnp.synchronize(outstanding)
    again = hnp.allreduce_async(a, op=hvd.Sum, name="before.shutdown.outstanding")
    assert again != outstanding and hnp.synchronize(again)[0] == total


def test_dynamic_process_set():
    ranks = list(range(0, hvd.size(), 2))
    ps = hvd.add_process_set(ranks)
    try:
        assert ps.process_set_id > 0 and ps.ranks == ranks and ps.size() == len(ranks)
        assert ps.included() == (hvd.rank() in ranks)
        if ps.included():
            assert ps.rank() == ranks.index(hvd.rank())
            out = hnp.allreduce(np.array([hvd.rank()], dtype=np.int64), op=hvd.Sum,
                                name="ps.sum", process_set=ps)
            assert out[0] == sum(ranks)
        else:
            assert ps.rank() == -1
    finally:
        assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None
    assert hvd.remove_process_set(ps) is False


def test_broadcast_in_a_process_set_takes_a_global_root_rank():
    # As in Horovod: root_rank names a global rank, which must be a member of the set. hvd
    # used to read it as a rank of the set, so a Horovod script broadcast from the wrong rank
    # (or deadlocked, where its ranks then disagreed on the root).
    n = hvd.size()
    ranks = list(range(1, n))  # without rank 0
    ps = hvd.add_process_set(ranks)
    try:
        if ps.included():
            root = ranks[-1]
            x = np.full(3, hvd.rank(), dtype=np.int64)
            assert hnp.broadcast(x, root, name="ps.bc", process_set=ps).tolist() == [root] * 3
            assert hnp.broadcast_object({"from": hvd.rank()}, root, process_set=ps) == \
                {"from": root}
            with pytest.raises(ValueError, match=r"root_rank 0 is not a member of process set "
                                                 r"\d+ \{1(,\d+)*\} \(root_rank is a global "
                                                 r"rank\)"):
                hnp.broadcast(x, 0, name="ps.bc.outsider", process_set=ps)
    finally:
        hvd.remove_process_set(ps)


def test_invalid_process_sets_are_rejected_with_the_reason():
    with pytest.raises(ValueError, match="duplicate"):
        hvd.add_process_set([0, 0])
    with pytest.raises(ValueError, match=str(hvd.size())):
        hvd.add_process_set([0, hvd.size()])
    unregistered = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match="not registered"):
        hnp.allreduce(np.zeros(1), process_set=unregistered)


def test_static_process_sets_at_init():
    n = hvd.size()
    hvd.shutdown()
    first, rest = hvd.ProcessSet([0]), hvd.ProcessSet(range(1, n))
    hvd.init(process_sets=[first, rest])
    try:
        assert first.process_set_id is not None and rest.process_set_id is not None
        assert first.process_set_id != rest.process_set_id
        mine = first if hvd.rank() == 0 else rest
        out = hnp.allreduce(np.ones(2), op=hvd.Sum, process_set=mine)
        assert out.tolist() == [mine.size()] * 2
    finally:
        hvd.shutdown()
        hvd.init()
    assert first.process_set_id is None


def test_timeline_is_written_by_rank_0(tmp_path):
    path = str(tmp_path / f"timeline.{os.environ.get('HVD_JOB_ID', 'single')}.json")
    shared = hvd.numpy.broadcast_object(path, 0)
    hvd.start_timeline(shared)
    hnp.allreduce(np.ones(8, dtype=np.float32), name="timeline.t")
    hvd.stop_timeline()
    if hvd.rank() == 0:
        import json
        events = json.load(open(shared))
        assert any('timeline.t' in json.dumps(e) for e in events)
        assert not any(e["name"] == "CYCLE_START" for e in events)


def test_a_timeline_started_with_mark_cycles_marks_each_dispatch(tmp_path):
    path = str(tmp_path / f"cycles.{os.environ.get('HVD_JOB_ID', 'single')}.json")
    shared = hvd.numpy.broadcast_object(path, 0)
    hvd.start_timeline(shared, mark_cycles=True)
    for i in range(3):
        hnp.allreduce(np.ones(8, dtype=np.float32), name=f"cycles.{i}")
    hvd.stop_timeline()
    if hvd.rank() == 0:
        import json
        marks = [e for e in json.load(open(shared)) if e["name"] == "CYCLE_START"]
        assert len(marks) >= 3 and all(e["ph"] == "i" for e in marks)
