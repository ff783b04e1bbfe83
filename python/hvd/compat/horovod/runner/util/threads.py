"""horovod.runner.util.threads on hvd: running a function in the background."""
import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Starts target(*args) on a new thread and returns the thread. `silent` drops the
    exception the target raises; `args` must be a tuple, as in Horovod."""
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple, not {type(args).__name__} (for one argument "
                         f"use (arg,))")
    run = target
    if silent:
        def run(*a):
            try:
                target(*a)
            except Exception:  # noqa: BLE001 - what `silent` asks for
                pass
    thread = threading.Thread(target=run, args=args, name=name, daemon=daemon)
    thread.start()
    return thread
