"""Horovod integrations hvd does not provide yet. The compatibility package's modules of those
names import one of these, so that a Horovod script fails saying so and what to use instead,
not with a bare ModuleNotFoundError. Raised as ModuleNotFoundError all the same, so code that
probes for an optional integration (`try: import horovod.spark`) behaves as without Horovod."""

_INSTEAD = ("start the training script with hvdrun on the cluster's hosts, or the training "
            "function with hvd.run (horovod.run) from the driver: docs/python.md")


def not_provided(module, what, instead=_INSTEAD):
    raise ModuleNotFoundError(f"{module}: hvd does not provide {what} yet; {instead}",
                              name=module)
