"""What the compatibility package's horovod.ray re-exports. Importing it needs Ray, as importing
Horovod's horovod.ray does (hvd.ray itself imports Ray only when it is used)."""
import ray  # noqa: F401

from hvd.ray import ElasticRayExecutor, RayExecutor  # noqa: F401
