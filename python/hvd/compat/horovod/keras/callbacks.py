"""horovod.keras.callbacks on hvd."""
from hvd.tensorflow.keras.callbacks import (  # noqa: F401
    BroadcastGlobalVariablesCallback, LearningRateScheduleCallback, LearningRateWarmupCallback,
    MetricAverageCallback)
