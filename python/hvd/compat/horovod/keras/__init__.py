"""horovod.keras on hvd: Keras 3 is tf.keras, so this is horovod.tensorflow.keras."""
from hvd.tensorflow.keras import *  # noqa: F401,F403
from hvd.tensorflow.keras import __all__  # noqa: F401
from horovod.keras import elastic  # noqa: F401,E402  (hvd.elastic.KerasState)
