"""horovod.common.process_sets on hvd: the process set class and its registry functions."""
from hvd._basics import ProcessSet, add_process_set, global_process_set, remove_process_set  # noqa: F401
