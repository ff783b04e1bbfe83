"""Imported by the compatibility package's horovod.ray: fails saying hvd lacks it."""
from hvd._not_provided import not_provided

not_provided("horovod.ray", "Horovod's Ray integration (RayExecutor, elastic Ray jobs)")
