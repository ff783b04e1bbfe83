"""horovod.runner on hvd: the helper modules Horovod's scripts and test utilities import. The
launcher itself is hvdrun (`horovodrun`'s flags are accepted there); `horovod.runner.run` is
hvd.run."""
from hvd._run import run  # noqa: F401
