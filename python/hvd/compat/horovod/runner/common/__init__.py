"""horovod.runner.common on hvd."""
