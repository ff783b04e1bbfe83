"""horovod.spark on hvd: run and run_elastic are hvd.spark's (docs/spark.md); as Horovod's, it
needs PySpark. The estimators (horovod.spark.torch, .keras, .lightning, .common) are not
provided: importing them says so."""
from hvd.spark._horovod import run, run_elastic  # noqa: F401
