"""horovod.ray on hvd: RayExecutor and ElasticRayExecutor are hvd.ray's (docs/ray.md); as
Horovod's, it needs Ray."""
from hvd.ray._horovod import ElasticRayExecutor, RayExecutor  # noqa: F401
