"""Imported by the compatibility package's horovod.spark: fails saying hvd lacks it."""
from hvd._not_provided import not_provided

not_provided("horovod.spark", "Horovod's Spark integration (horovod.spark.run, the estimators)")
