"""horovod.torch.compression on hvd."""
from hvd.torch.compression import (Compression, Compressor, FP16Compressor,  # noqa: F401
                                   NoneCompressor)
