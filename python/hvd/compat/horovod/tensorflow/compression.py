"""horovod.tensorflow.compression on hvd."""
from hvd.tensorflow.compression import (Compression, Compressor, FP16Compressor,  # noqa: F401
                                        NoneCompressor)
