"""What the commands read: a saved model (HDF5, ``Model.save_params``) or a saved graph (JSON, ``ng.serialize``).

The kind is told by the file's first bytes, then its name: JSON text (or a ``.json`` file) is a
graph (``ng.deserialize``); an HDF5 signature (or a ``.h5``/``.hdf5`` file, so that a damaged one
gets the checkpoint reader's message) is a model, rebuilt with ``neon.saving.load_model`` — a
``Model``, or another model class that registers itself (a ``GAN``, a ``DQNAgent``, ``Seq2Seq``...).

Example:
    >>> source = load_source("out/mnist_mlp.h5")     # a Model
    >>> source = load_source("graph.json")           # a list of root ops
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import ngraph_core as ng

from ..checkpoint_file import HDF5_SIGNATURE
from ..model import Model
from ..saving import load_model
from ..training import TrainingOwner
from .common import CommandError

__all__ = ["graph_source", "load_source", "select_in"]

_PROBE_BYTES = 1024  # an HDF5 signature sits at 0 or after a 512-byte user block
_MODEL_SUFFIXES = (".h5", ".hdf5")


def load_source(path: str | Path) -> TrainingOwner | list[ng.Op]:
    """A saved model (a ``Model``, a ``GAN``...), or a saved graph as its list of root ops.

    Args:
        path: an HDF5 checkpoint written by a model's ``save_params``, or a JSON graph written by
            ``ng.serialize``.

    Returns:
        the model, or the graph's roots.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: an HDF5 file that is not a loadable Model checkpoint.
        SerializationError: JSON that is not a valid graph document.
        CommandError: a file of neither kind.

    Example:
        >>> load_source("model.h5").epoch
        3
    """
    path = Path(path)
    with open(path, "rb") as f:  # FileNotFoundError / IsADirectoryError: reported with the path
        head = f.read(_PROBE_BYTES)
    if head.lstrip()[:1] == b"{" or path.suffix.lower() == ".json":
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CommandError(f"{path}: expected a graph document in UTF-8 JSON, received bytes that are not UTF-8 "
                               f"(at byte {exc.start}); hint: the file is damaged") from None
        return ng.deserialize(text)
    if HDF5_SIGNATURE in (head[:8], head[512:520]) or path.suffix.lower() in _MODEL_SUFFIXES:
        return load_model(path)  # a damaged .h5 file gets the checkpoint reader's precise message
    raise CommandError(f"{path}: expected a saved model (HDF5, from Model.save_params) or a saved graph (JSON, from "
                       f"ng.serialize), received a file that is neither ({len(head)} bytes read); hint: check the path")


def graph_source(source: TrainingOwner | list[ng.Op]) -> Any:
    """What ``ng.viz.render`` and ``ng.select`` take for ``source``: the model itself when it exposes its
    graph (``__ngraph_ops__``), else its inference graph for one sample (the graph ``predict`` runs);
    for another model class (a ``GAN``...), its variables.

    Example:
        >>> ng.viz.render(graph_source(load_source("m.h5")), "m.svg")
    """
    if isinstance(source, Model) and not hasattr(source, "__ngraph_ops__"):
        _, y_hat = source.inference_graph(1)
        return [y_hat]
    if isinstance(source, TrainingOwner) and not isinstance(source, Model):
        return list(source.checkpoint_keys()[0].values())
    return source


def select_in(source: TrainingOwner | list[ng.Op], query: str, strict: bool = False) -> Any:
    """The ``Selection`` of ``query`` over a model (``Model.select``) or a graph (``ng.select``).

    A layer type the graph does not have (``"Afine variable"``) is a warning printed on stderr
    (``warning: ... did you mean Affine?``), or with ``strict`` a ``SelectorError``.

    Raises:
        SelectorError: a malformed query (the message points at the column); with ``strict``, a
            layer type that names nothing in the graph.

    Example:
        >>> select_in(load_source("m.h5"), "Affine variable").names
    """
    unknown_types = "error" if strict else "warn"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ng.SelectorWarning)
        if isinstance(source, Model) and hasattr(source, "select"):
            selection = source.select(query, unknown_types=unknown_types)
        else:
            selection = ng.select(graph_source(source), query, unknown_types=unknown_types)
    for warning in caught:
        if issubclass(warning.category, ng.SelectorWarning):
            print(f"warning: {warning.message}", file=sys.stderr)
        else:  # not ours to report: hand it back to the warnings machinery
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return selection
