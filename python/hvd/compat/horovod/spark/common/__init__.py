"""horovod.spark.common: Horovod's Spark estimators, not provided by hvd (its import says so)."""
from hvd._no_spark_estimators import common  # noqa: F401
