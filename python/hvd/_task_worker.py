"""A rank's process under hvd.spark.run (hvd/_ranks.py: run_rank): reads the pickled
(func, args, kwargs) from stdin, runs it with the HVD_* placement in its environment, and writes
its outcome (hvd/_outcome.py) to the file HVD_TASK_RESULT names. A function that raises exits
this process with code 1 at once, as a crashed rank would."""
import os
import sys


def main():
    import cloudpickle

    from hvd import _outcome

    result_path = os.environ.pop("HVD_TASK_RESULT")
    func, args, kwargs = cloudpickle.loads(sys.stdin.buffer.read())
    outcome = _outcome.call(func, args, kwargs)
    with open(result_path + ".part", "wb") as f:
        f.write(_outcome.dumps(outcome))
    os.replace(result_path + ".part", result_path)
    _outcome.exit_if_failed(outcome)


if __name__ == "__main__":
    main()
