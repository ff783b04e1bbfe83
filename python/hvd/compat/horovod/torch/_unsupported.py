"""What the compatibility package tells scripts that reach for parts of Horovod hvd lacks."""

ELASTIC_MESSAGE = (
    "horovod elastic: hvd implements Horovod's elastic training for PyTorch (horovod.torch."
    "elastic: run, TorchState, ElasticSampler) but not yet for TensorFlow and Keras "
    "(TensorFlowKerasState and the elastic Keras callbacks). Run this script with a fixed number "
    "of ranks (hvdrun -np N) without the elastic wrapper")
