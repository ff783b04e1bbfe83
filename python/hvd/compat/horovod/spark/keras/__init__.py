"""horovod.spark.keras: Horovod's Spark estimators, not provided by hvd (its import says so)."""
from hvd._no_spark_estimators import keras  # noqa: F401
