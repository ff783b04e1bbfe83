"""Imported by the compatibility package's horovod.spark estimator modules (horovod.spark.torch,
.keras, .lightning, .common): fails saying hvd lacks the estimators and what to use."""
from hvd._not_provided import not_provided


def fail(module):
    not_provided(module, "Horovod's Spark estimators (TorchEstimator, KerasEstimator, "
                 "LightningEstimator and their Store)",
                 "train with horovod.spark.run (hvd.spark.run) and a function that reads its "
                 "share of the data: docs/spark.md")

