"""How hvd.spark.run and hvd.ray place the ranks of the workers a cluster framework started
(hvd/_ranks.py), and which failure they report."""
from hvd import _ranks
from hvd._ranks import Outcome, Placement


def test_ranks_go_host_by_host_starting_where_the_first_worker_runs():
    placed = _ranks.place(["b", "a", "b", "a"])
    assert [p.rank for p in placed] == [0, 2, 1, 3]
    assert [(p.local_rank, p.local_size) for p in placed] == [(0, 2), (0, 2), (1, 2), (1, 2)]
    assert [(p.cross_rank, p.cross_size) for p in placed] == [(0, 2), (1, 2), (0, 2), (1, 2)]
    assert {p.size for p in placed} == {4}


def test_uneven_hosts_count_cross_ranks_among_hosts_with_that_local_rank():
    placed = _ranks.place(["a", "a", "a", "b"])
    assert [(p.rank, p.local_rank, p.cross_rank, p.cross_size) for p in placed] == [
        (0, 0, 0, 2), (1, 1, 0, 1), (2, 2, 0, 1), (3, 0, 1, 2)]


def test_each_rank_gets_its_placement_and_rank_0_s_rendezvous():
    env = _ranks.rank_environment(Placement(1, 2, 1, 2, 0, 1, "h"), "10.0.0.2", 4242, "s3",
                                  "Spark", "job")
    assert env["HVD_RANK"] == "1" and env["HVD_LOCAL_RANK"] == "1"
    assert env["HVD_RENDEZVOUS_ADDR"] == "10.0.0.2" and env["HVD_RENDEZVOUS_PORT"] == "4242"
    assert env["HVD_EXTERNAL_LAUNCHER"] == "Spark" and env["HVD_SECRET"] == "s3"


def test_the_reported_failure_is_a_rank_s_own_error_before_its_consequences():
    def outcome(rank, ok, finished, peer):
        return Outcome(rank, "h", ok, "trace", "", finished, peer)

    assert _ranks.first_failure([outcome(0, True, 1, False)]) is None
    cause = _ranks.first_failure([outcome(0, False, 1.0, True), outcome(2, False, 2.0, False),
                                  outcome(1, False, 3.0, False)])
    assert cause.rank == 2  # HorovodInternalError on rank 0 came first, but followed from it
