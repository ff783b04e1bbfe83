"""Folder of hvd's `horovod` compatibility package. It is not importable from here on purpose:
hvdrun --horovod-compat (or HVD_HOROVOD_COMPAT=1) puts this folder on the workers'
PYTHONPATH, so `import horovod.torch as hvd` runs on hvd only when asked for."""
