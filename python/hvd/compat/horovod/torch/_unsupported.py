"""What the compatibility package tells scripts that reach for parts of Horovod hvd lacks."""

ELASTIC_MESSAGE = (
    "horovod elastic: hvd does not implement Horovod's elastic training (ranks joining and "
    "leaving a running job, hvd.elastic.run, TorchState, TensorFlowKerasState). Run the script "
    "with a fixed number of ranks (hvdrun -np N) without the elastic wrapper, or with Horovod's "
    "own horovodrun --min-np/--max-np")
