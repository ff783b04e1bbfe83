"""What the compatibility package's horovod.spark re-exports. Importing it needs PySpark, as
importing Horovod's horovod.spark does, so code that probes `import horovod.spark` learns
whether Spark is there (hvd.spark itself imports PySpark only when a job runs)."""
import pyspark  # noqa: F401

from hvd.spark import run, run_elastic  # noqa: F401
