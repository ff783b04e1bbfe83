"""The replica-consistency guard: data-parallel training is only correct while every rank holds
the same trainable weights. A missed broadcast, a rank-dependent initialisation or a gradient
some rank forgot to reduce breaks that without any error: the job runs to the end and trains
different models. The frontends' optimizers (and DistributedGradientTape) call a Guard at the
points HVD_CHECK_REPLICAS names; the guard compares the ranks' weights and fails the job on
every rank, naming the ranks and the first variable that differ, when they are not the same.

The comparison costs one small allreduce of three float64 numbers per variable (the sum, the
sum of squares and the sum of neighbours' products, the last telling permutations apart), plus
one of two integers for the model's structure. The numbers are compared with a relative
tolerance (kTolerance of the bound each sum can reach), so that hosts whose CPUs round a few
last bits differently are not flagged, while weights that started apart (differences of the
order of the weights themselves) always are. Only when they differ does the guard gather every
rank's numbers, to say which ranks differ from rank 0 of the process set.

Every rank must reach the same decision to check at the same update, or the check's collective
would wait on one rank alone: the count of updates restarts at each elastic round, when a
worker that joined starts counting from zero.
"""
from __future__ import annotations

import zlib
from typing import Callable, List, Optional, Sequence

import numpy as np

from hvd import _basics, _core

kTolerance = 1e-5
_NON_FINITE = 1e300  # a variable holding inf or NaN is summarised as this on every statistic


class ReplicaMismatchError(RuntimeError):
    """The ranks hold different trainable weights (HVD_CHECK_REPLICAS). Not a
    HorovodInternalError: an elastic job must not restore and retry on it."""


def due(updates_done: int, every: int, first: int = 1) -> bool:
    """Whether the check runs once `updates_done` updates are done, for HVD_CHECK_REPLICAS's
    `every` (-1 off, 0 once only, N also after every N-th update). The first check comes
    after `first` updates: 0 checks the starting weights, before any update."""
    if every < 0:
        return False
    return updates_done == first or (every > 0 and updates_done > 0 and updates_done % every == 0)


class Guard:
    """One optimizer's (or one tape's sources') check. `tick()` counts an update and says
    whether the check is due now; `check(stats, counts, names, shapes)` compares the ranks.
    `fix` tells the user how to give every rank the same weights, in the frontend's words."""

    def __init__(self, what: str, process_set, fix: str, every: Optional[int] = None,
                 before_update: bool = False, first: int = 1):
        self.what = what
        self.first = first  # updates before the first check (see due())
        # tick() comes before each update (the TensorFlow frontends reduce the gradients of
        # update k+1 after update k and whatever broadcast followed it): the check of "after
        # update k" runs at the (k+1)-th tick.
        self.before_update = before_update
        self.process_set = process_set
        self.fix = fix
        self.every = _core.check_replicas_every() if every is None else every
        self.updates = 0
        self._round = _core.elastic_round()
        # A script may update once before it broadcasts (Horovod's own tests do: a step, then
        # broadcast_parameters; or a gradient of deliberately different weights, reduced once).
        # A first check that finds the ranks apart is repeated after the next update, and fails
        # only if they are still apart then: every frontend fails by its second check. The
        # repeat waits for an update that changed some rank's weights (a graph may re-run its
        # gradient reductions without applying them): only then did the ranks train apart.
        self._confirm_at: Optional[int] = None
        self._found_at = 0  # the update count of the first check that found them apart
        self._found: Optional[np.ndarray] = None  # this rank's statistics then

    @property
    def enabled(self) -> bool:
        return self.every >= 0

    def _new_round(self) -> None:
        """A new elastic round: every rank counts from zero, and a repeat pending from the last
        round is dropped (a worker that joined has none, and every rank must decide alike)."""
        current = _core.elastic_round()
        if current != self._round:
            self._round, self.updates, self._confirm_at, self._found = current, 0, None, None

    def tick(self) -> bool:
        self._new_round()
        self.updates += 1
        return self.due_now()

    def due_now(self) -> bool:
        """Whether the check runs at the current count of updates (due(), or the repeat of a
        first check that found the ranks apart)."""
        return due(self.updates_done, self.every, self.first) or \
            self.updates_done == self._confirm_at

    def at(self, updates_done: int) -> None:
        """Takes the count of updates from the caller (a Keras optimizer's iterations, which
        the ranks' broadcasts and elastic state keep equal) instead of counting ticks."""
        self._new_round()
        self.updates = updates_done + (1 if self.before_update else 0)

    @property
    def updates_done(self) -> int:
        return self.updates - 1 if self.before_update else self.updates

    def check(self, stats: np.ndarray, counts: Sequence[int], names: Sequence[str],
              shapes: Sequence[Sequence[int]], dtypes: Sequence[str]) -> None:
        """Raises ReplicaMismatchError on every rank of the process set when the ranks' weights
        differ; `stats` is summarise()'s (len(names), 3) array of this rank's variables."""
        ranks = self.process_set.ranks or list(range(_basics.size()))
        structure = zlib.crc32(repr([(tuple(s), d) for s, d in zip(shapes, dtypes)]).encode())
        meta = np.array([len(names), structure], dtype=np.int64)
        if not self._check_structure(meta, ranks, names):
            return
        if not len(names):
            return
        flat = np.ascontiguousarray(stats, dtype=np.float64).reshape(-1)
        repeat = self._confirm_at is not None and self.updates_done == self._confirm_at
        changed = float(not repeat or self._found is None or not np.array_equal(flat, self._found))
        both = _allreduce_max(np.concatenate([flat, -flat, [changed]]), f"{self._key}.weights",
                              self.process_set)
        high, low = both[:flat.size].reshape(-1, 3), -both[flat.size:-1].reshape(-1, 3)
        tolerance = _tolerance(high, np.asarray(counts, dtype=np.float64))
        # Every rank decides alike below: each decision follows from the same Max.
        if not np.any(high - low > tolerance):
            self._confirm_at, self._found = None, None
            return
        if self._confirm_at is None and self.updates_done == self.first:
            self._confirm_at, self._found_at = self.updates_done + 1, self.updates_done
            self._found = flat.copy()
            return
        if repeat and both[-1] == 0:  # no rank's weights changed since: nothing trained apart
            self._confirm_at += 1
            return
        from hvd import numpy as hvd_numpy
        every_rank = hvd_numpy.allgather(flat.reshape(1, -1), name=f"{self._key}.detail",
                                         process_set=self.process_set)
        every_rank = every_rank.reshape(len(ranks), len(names), 3)
        apart = np.abs(every_rank - every_rank[0]) > tolerance / 2  # (rank, variable, stat)
        differing = [ranks[i] for i in range(len(ranks)) if apart[i].any()]
        varies = apart.any(axis=(0, 2)) if apart.any() else (high - low > tolerance).any(axis=1)
        first = int(np.argmax(varies))
        who = (f"{_listed(differing)} {'differs' if len(differing) == 1 else 'differ'} from "
               f"rank {ranks[0]}" if differing else "they differ by more than the tolerance")
        raise ReplicaMismatchError(
            f"{self._where()}: the ranks hold different trainable weights: {who}. The first "
            f"variable that differs is {names[first]!r} (shape {list(shapes[first])}, "
            f"{dtypes[first]}). Data-parallel training needs every rank to start from the same "
            f"weights and apply the same reduced gradients: {self.fix}. Set "
            "HVD_CHECK_REPLICAS=off (hvdrun --check-replicas off) to skip this check.")

    @property
    def _key(self) -> str:
        return f"hvd.check_replicas.{self.what}"

    def _where(self) -> str:
        done = self.updates_done
        when = "before the first update" if done == 0 else f"after update {done}"
        if self._confirm_at is not None and done == self._confirm_at:
            found = self._found_at
            before = "before the first update" if found == 0 else f"after update {found}"
            when += f" (and {before}: no broadcast made them equal since)"
        return f"replica check of {self.what} {when}"

    def _check_structure(self, meta, ranks, names) -> bool:
        """False when a rank of the set has joined (hvd.join): it has no weights to compare
        and counts as zeros in the reduction, so every rank still training skips the check,
        alike. Raises when the ranks' models differ."""
        present = np.concatenate([[1], meta])  # a joined rank contributes 0 here
        both = _allreduce_max(np.concatenate([present, -present]), f"{self._key}.structure",
                              self.process_set)
        n = present.size
        if -both[n] != 1:
            return False
        if all(both[i] == -both[n + i] for i in range(1, n)):
            return True
        from hvd import numpy as hvd_numpy
        every_rank = hvd_numpy.allgather(meta.reshape(1, 2), name=f"{self._key}.structures",
                                         process_set=self.process_set)
        mine = every_rank[0]
        differing = [ranks[i] for i in range(len(ranks)) if (every_rank[i] != mine).any()]
        counts = ", ".join(f"rank {r}: {int(every_rank[i][0])}" for i, r in enumerate(ranks))
        raise ReplicaMismatchError(
            f"{self._where()}: the ranks train different models: {_listed(differing)} "
            f"{'has' if len(differing) == 1 else 'have'} other trainable variables (count or "
            f"shapes) than rank {ranks[0]} "
            f"(variables per rank: {counts}). Every rank must build the same model; ranks "
            "that train different models belong in different process sets.")


def _allreduce_max(values: np.ndarray, name: str, process_set) -> np.ndarray:
    from hvd import numpy as hvd_numpy
    return hvd_numpy.allreduce(values, op=_basics.Max, name=name, process_set=process_set)


def _tolerance(high: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per variable and statistic: kTolerance of the largest value the statistic can take
    (|sum| and |neighbours' products| are at most sqrt(count * sum of squares))."""
    squares = np.maximum(high[:, 1], 0.0)
    bound = np.sqrt(np.maximum(counts, 1.0) * squares)
    tolerance = np.stack([bound, squares, bound], axis=1) * kTolerance
    return np.maximum(tolerance, 1e-30)


def _listed(ranks: List[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def summarise(arrays, chunk: int = 1 << 22) -> np.ndarray:
    """(len(arrays), 3) float64: each array's sum, sum of squares and sum of neighbours'
    products, in chunks so that a large variable needs no float64 copy of its whole size."""
    out = np.zeros((len(arrays), 3))
    for i, a in enumerate(arrays):
        flat = np.asarray(a).reshape(-1)
        if np.iscomplexobj(flat):
            flat = flat.view(flat.real.dtype)
        for start in range(0, flat.size, chunk):
            c = flat[start:start + chunk].astype(np.float64)
            # einsum, not BLAS's dot: a rank bound to one core would run BLAS's threads on it
            # (30x slower than one thread, measured with 2 ranks on 2 cores).
            out[i] += (c.sum(), np.einsum("i,i->", c, c),
                       np.einsum("i,i->", c[:-1], c[1:]) if c.size > 1 else 0.0)
    return finite_or_marked(out)


def finite_or_marked(stats: np.ndarray) -> np.ndarray:
    """Rows holding inf or NaN replaced by one marker, so that they compare (NaN never does)."""
    bad = ~np.isfinite(stats).all(axis=1)
    stats[bad] = _NON_FINITE
    return stats


def run_check(guard: Guard, variables: Sequence, name_of: Callable, values_of: Callable) -> None:
    """guard.check() for framework variables: `name_of(v)` their names, `values_of(vs)` the
    (len(vs), 3) statistics."""
    guard.check(values_of(variables), [int(np.prod(tuple(v.shape))) for v in variables],
                [name_of(v) for v in variables], [tuple(v.shape) for v in variables],
                [str(getattr(v.dtype, "name", v.dtype)).replace("torch.", "") for v in variables])
