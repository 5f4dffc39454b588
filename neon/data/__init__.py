"""neon data: minibatch iterators and dataset loaders (local files only, never downloads)."""

from .augment import ImageIterator, channel_stats, random_crop, random_flip
from .batches import batch_size, count_batches, dataset_shapes, in_order
from .cifar10 import CIFAR10_CLASSES, load_cifar10, read_cifar10_batch
from .idx import read_idx
from .images import load_image_folder, read_image
from .iterators import ArrayIterator, DataError
from .mnist import load_mnist, load_mnist_subset
from .shapes import SHAPES_CLASSES, make_shapes_dataset

__all__ = ["ArrayIterator", "DataError", "ImageIterator", "channel_stats", "random_crop", "random_flip",
           "read_idx", "load_mnist", "load_mnist_subset", "CIFAR10_CLASSES", "load_cifar10", "read_cifar10_batch",
           "load_image_folder", "read_image", "SHAPES_CLASSES", "make_shapes_dataset",
           "batch_size", "count_batches", "dataset_shapes", "in_order"]
