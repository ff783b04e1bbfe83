"""Horovod's Spark estimators, which hvd does not provide yet. The compatibility package's
horovod.spark.torch (.keras, .lightning, .common) import their name from here
(`from hvd._no_spark_estimators import torch`), which fails saying so and what to use: a
ModuleNotFoundError, so code that probes for them behaves as without them."""
from hvd._not_provided import not_provided


_ESTIMATOR_MODULES = ("torch", "keras", "lightning", "common")


def __getattr__(name):
    if name not in _ESTIMATOR_MODULES:  # the import system's own questions (__path__, ...)
        raise AttributeError(name)
    not_provided(f"horovod.spark.{name}",
                 "Horovod's Spark estimators (TorchEstimator, KerasEstimator, LightningEstimator "
                 "and their Store)",
                 "train with horovod.spark.run (hvd.spark.run) and a function that reads its "
                 "share of the data: docs/spark.md")
