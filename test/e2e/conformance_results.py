"""What the conformance workers share: each case's result, or the exception it raised, as
JSON in OUT_DIR/<rank>.json (test_horovod_conformance.py compares Horovod's with hvd's)."""
import json
import os


class Results:
    def __init__(self, tensor_values):
        """tensor_values(x): (dtype name, shape, flat list of floats) for the framework's
        tensors, None for anything else."""
        self.cases = {}
        self._tensor_values = tensor_values

    def record(self, name, fn):
        try:
            value = fn()
        except Exception as e:  # recorded: the test tells "Horovod refuses it too" from a bug
            # `caught_as`: every class an `except` clause could name to catch it (a subclass
            # of Horovod's type is caught as Horovod's is).
            self.cases[name] = {"error": type(e).__name__, "message": str(e)[:300],
                                "caught_as": [c.__name__ for c in type(e).__mro__]}
            return
        self.cases[name] = self.encode(value)

    def encode(self, value):
        tensor = self._tensor_values(value)
        if tensor is not None:
            dtype, shape, values = tensor
            return {"dtype": dtype, "shape": list(shape), "values": values}
        if isinstance(value, (list, tuple)):
            return [self.encode(v) for v in value]
        if isinstance(value, dict):
            return {str(k): self.encode(v) for k, v in value.items()}
        return value

    def record_allreduce_matrix(self, hvd, ramp, dtypes):
        """An allreduce of ramp((3, 4), dtype) for every reduce op of Horovod's and every
        dtype of `dtypes` (name -> the framework's dtype)."""
        ops = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
               "product": hvd.Product}
        for op_name, op in ops.items():
            for dt_name, dt in dtypes.items():
                self.record(f"allreduce.{op_name}.{dt_name}",
                            lambda op=op, dt=dt, n=f"ar.{op_name}.{dt_name}":
                            hvd.allreduce(ramp((3, 4), dt), op=op, name=n))

    def write(self, rank):
        with open(os.path.join(os.environ["OUT_DIR"], f"{rank}.json"), "w") as f:
            json.dump(self.cases, f)
