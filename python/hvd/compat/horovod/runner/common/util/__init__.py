"""horovod.runner.common.util on hvd."""
