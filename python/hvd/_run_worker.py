"""The command hvd.run's workers run (``python -m hvd._run_worker``): fetch the function from
the driver (hvd/_run.py), run it, send back its result or its traceback with the rank it ended
with. A function that raises also makes this process exit 1, so hvdrun ends the job as for any
failed rank."""
import os
import socket
import time


def _connect(host, port, deadline):
    while True:
        try:
            return socket.create_connection((host, port), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _final_rank(started_as):
    """The rank the result belongs to: an elastic job's worker may end in another round, with
    another rank, than the one it started with (the last it joined, also after hvd.shutdown)."""
    import sys
    basics = sys.modules.get("hvd._basics")  # not imported: the function never joined
    last = basics.last_rank() if basics is not None else None
    return str(last) if last is not None else started_as


def main():
    import cloudpickle

    from hvd import _outcome
    from hvd._run import _frame, _read_exact, _read_frame, proof

    rank = os.environ["HVD_RANK"]
    host = os.environ.get("HVD_HOSTNAME") or socket.gethostname()
    # hvdrun serves its rendezvous on the driver's machine, at an address this worker reaches.
    driver = os.environ["HVD_RENDEZVOUS_ADDR"], int(os.environ["HVD_RUN_DRIVER_PORT"])
    key = os.environ.pop("HVD_RUN_KEY")  # not for the user's function or its children
    with _connect(*driver, time.monotonic() + 30) as conn:
        conn.sendall(proof(key, _read_exact(conn, 32)))
        conn.sendall(_frame(host.encode()))
        func, args, kwargs = cloudpickle.loads(_read_frame(conn))
        conn.settimeout(None)
        outcome = _outcome.call(func, args, kwargs)
        conn.sendall(_frame(_final_rank(rank).encode()) + _frame(_outcome.dumps(outcome)))
    _outcome.exit_if_failed(outcome)  # hvdrun then ends the job as for any failed rank


if __name__ == "__main__":
    main()
