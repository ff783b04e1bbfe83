"""horovod.tensorflow.util on hvd: the helpers Horovod's scripts and tests import from it."""
import tensorflow as tf


def _executing_eagerly():
    """Whether TensorFlow runs eagerly here (False inside a tf.function or a v1 graph)."""
    return tf.executing_eagerly()


def vars_to_refs(variables):
    """Hashable references to variables (for sets and dict keys)."""
    if isinstance(variables, list):
        return [vars_to_refs(v) for v in variables]
    return variables.ref()


def refs_to_vars(refs):
    """The variables behind vars_to_refs' references."""
    if isinstance(refs, list):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()
