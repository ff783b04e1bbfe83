"""horovod.ray: not provided by hvd yet; importing it says so (hvd/_not_provided.py)."""
from hvd import _no_horovod_ray  # noqa: F401
