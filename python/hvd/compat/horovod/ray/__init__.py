"""horovod.ray on hvd: RayExecutor is hvd.ray's (docs/ray.md); elastic Ray jobs are not
provided yet (min_workers/max_workers say so)."""
from hvd.ray import RayExecutor  # noqa: F401
