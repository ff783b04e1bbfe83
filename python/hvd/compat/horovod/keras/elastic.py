"""horovod.keras.elastic on hvd: Keras 3 is tf.keras, so this is horovod.tensorflow.keras.elastic."""
from hvd.tensorflow.keras.elastic import *  # noqa: F401,F403
from hvd.tensorflow.keras.elastic import __all__  # noqa: F401
