"""horovod.torch.elastic.sampler on hvd."""
from hvd.torch.elastic.sampler import ElasticSampler  # noqa: F401
