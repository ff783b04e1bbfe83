"""horovod.ray on hvd: RayExecutor is hvd.ray's (docs/ray.md); as Horovod's, it needs Ray.
Elastic Ray jobs are not provided yet (min_workers/max_workers say so)."""
from hvd.ray._horovod import RayExecutor  # noqa: F401
