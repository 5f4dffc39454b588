"""neon data: minibatch iterators and dataset loaders (local files only, never downloads)."""

from .augment import ImageIterator, channel_stats, random_crop, random_flip
from .batches import batch_length, batch_size, count_batches, dataset_shapes, in_order
from .cifar10 import CIFAR10_CLASSES, load_cifar10, read_cifar10_batch
from .idx import read_idx
from .images import load_image_folder, read_image
from .iterators import ArrayIterator, DataError
from .mnist import load_mnist, load_mnist_subset
from .packaged import MissingDataError, find_archive
from .sequences import SequenceIterator, pad_sequences, sequence_mask
from .shapes import SHAPES_CLASSES, make_shapes_dataset
from .speech import (
    MissingDependencyError,
    load_librispeech,
    log_mel_spectrogram,
    mel_filterbank,
    read_wav,
    resample,
    stft,
    synthesize_digits,
    walk_librispeech,
    wav_features,
    write_wav,
)
from .text import (
    CharIterator,
    Vocabulary,
    char_pairs,
    load_aclimdb,
    load_movie_snippets,
    load_shakespeare,
    tokenize_words,
)

__all__ = ["ArrayIterator", "DataError", "ImageIterator", "channel_stats", "random_crop", "random_flip",
           "read_idx", "load_mnist", "load_mnist_subset", "CIFAR10_CLASSES", "load_cifar10", "read_cifar10_batch",
           "load_image_folder", "read_image", "SHAPES_CLASSES", "make_shapes_dataset",
           "batch_length", "batch_size", "count_batches", "dataset_shapes", "in_order",
           "MissingDataError", "find_archive", "SequenceIterator", "pad_sequences", "sequence_mask",
           "MissingDependencyError", "load_librispeech", "log_mel_spectrogram", "mel_filterbank", "read_wav",
           "resample", "stft", "synthesize_digits", "walk_librispeech", "wav_features", "write_wav",
           "CharIterator", "Vocabulary", "char_pairs", "load_aclimdb", "load_movie_snippets", "load_shakespeare",
           "tokenize_words"]
