"""neon data: minibatch iterators and dataset loaders (local files only, never downloads)."""

from .idx import read_idx
from .iterators import ArrayIterator, DataError
from .mnist import load_mnist, load_mnist_subset

__all__ = ["ArrayIterator", "DataError", "read_idx", "load_mnist", "load_mnist_subset"]
