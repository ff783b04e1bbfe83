"""Gradient compression, as Horovod's: compress before the collective, decompress after. The
frameworks' modules (hvd.torch.compression, hvd.tensorflow.compression) add their FP16Compressor
and the Compression namespace."""


class Compressor:
    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
