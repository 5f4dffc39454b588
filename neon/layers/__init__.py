"""neon layers (every one builds ngraph ops)."""

from .attention import LayerNorm, MultiHeadAttention, PositionEmbedding, SinusoidalPositionEmbedding
from .base import Layer, LayerError, is_training, training_mode
from .cells import GRUCell, LSTMCell, RNNCell, SimpleRNNCell
from .composite import CompositeLayer
from .convolution import Conv, Convolution, Deconv, Deconvolution
from .core import Activation, Affine, Bias, Linear
from .dropout import Dropout
from .embedding import LookupTable
from .normalization import BatchNorm
from .pooling import GlobalAvgPool, Pool
from .recurrent import (
    GRU,
    LSTM,
    BiLSTM,
    BiRNN,
    DeepBiLSTM,
    DeepBiRNN,
    Recurrent,
    RecurrentLast,
    RecurrentMean,
    RecurrentSum,
    sequence_lengths,
)
from .reshaping import Flatten, Unflatten
from .residual import ResidualBlock
from .serialization import deserialize_layer, layer_classes, serialize_layer
from .transformer import (
    FeedForward,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "Layer", "LayerError", "is_training", "training_mode", "CompositeLayer",
    "Activation", "Affine", "Bias", "Linear", "Dropout", "LookupTable", "BatchNorm", "Flatten", "Unflatten",
    "Conv", "Convolution", "Deconv", "Deconvolution", "Pool", "GlobalAvgPool", "ResidualBlock",
    "deserialize_layer", "layer_classes", "serialize_layer",
    "RNNCell", "SimpleRNNCell", "LSTMCell", "GRUCell", "Recurrent", "LSTM", "GRU", "BiRNN", "BiLSTM", "DeepBiRNN",
    "DeepBiLSTM", "RecurrentSum", "RecurrentMean", "RecurrentLast", "sequence_lengths",
    "LayerNorm", "MultiHeadAttention", "PositionEmbedding", "SinusoidalPositionEmbedding", "FeedForward",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder",
]
