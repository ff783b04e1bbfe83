"""horovod.common.exceptions on hvd."""
from hvd._basics import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
