"""horovod.spark: not provided by hvd yet; importing it says so (hvd/_not_provided.py)."""
from hvd import _no_horovod_spark  # noqa: F401
