"""A rank's process under hvd.spark.run and hvd.ray (hvd/_ranks.py): reads the pickled
(func, args, kwargs) from stdin, runs it with the HVD_* placement in its environment, and writes
(ok, return value or traceback, whether the error was hvd's own HorovodInternalError) to the
file HVD_TASK_RESULT names. A function that raises exits this process with code 1 at once, as a
crashed rank would: a clean shutdown would wait for peers stuck in a collective with it."""
import os
import pickle
import sys
import traceback


def main():
    import cloudpickle

    result_path = os.environ.pop("HVD_TASK_RESULT")
    func, args, kwargs = cloudpickle.loads(sys.stdin.buffer.read())
    peer_failure = False
    try:
        outcome = (True, func(*args, **kwargs))
    except BaseException as e:  # noqa: B036  (SystemExit and KeyboardInterrupt fail it too)
        # hvd's collective errors: the cause is usually another rank's failure.
        peer_failure = any(c.__name__ == "HorovodInternalError" for c in type(e).__mro__)
        outcome = (False, traceback.format_exc())
    try:
        data = cloudpickle.dumps((*outcome, peer_failure))
    except Exception as e:  # noqa: BLE001  (whatever the result's pickling raises)
        outcome = (False, f"rank {os.environ.get('HVD_RANK')}'s result cannot be pickled: {e!r}")
        data = pickle.dumps((*outcome, False))
    with open(result_path + ".part", "wb") as f:
        f.write(data)
    os.replace(result_path + ".part", result_path)
    sys.stdout.flush()
    sys.stderr.flush()
    if not outcome[0]:
        sys.stderr.write(outcome[1])
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
