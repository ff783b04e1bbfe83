"""horovod.runner.util on hvd."""
