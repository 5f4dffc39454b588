"""``load_model``: a whole ``Model`` back from a checkpoint, with no code that rebuilds its layers.

``Model.save_params`` writes, besides the weights, the layers' configs (``meta.model[0]``:
``{"class_name", "config"}`` as ``serialize_layer`` gives it), the input kind
(``meta.model[1]``), one sample's shape and the epoch. ``load_model`` reads the file once (in
the sandboxed reader of ``neon.saving``), rebuilds the layers with ``deserialize_layer``, builds
the model for the recorded input shape and kind, and writes the weights, epoch and history
into it (``TrainingOwner.restore``, as ``Model.load_params`` does). The optimizer is not part
of a model's config, so its state stays in the file: pass ``resume_from=`` to ``fit`` to
continue training with it.

Checkpoints of other owners (a ``GAN``, the character models of ``model_zoo``) record no layer
configs; loading one is a ``CheckpointError`` that says which class wrote it and how to load it.

Example:
    >>> model = load_model("out/mnist_mlp.h5")
    >>> model.predict(X_test).argmax(axis=1)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .inputs import KINDS
from .layers import Layer, LayerError, deserialize_layer, layer_classes
from .model import Model
from .saving import CheckpointData, CheckpointError, read_checkpoint

__all__ = ["load_model"]

_OTHER_OWNERS = {  # checkpoints whose first model record is not a layer: who wrote them, and how to load them
    "GAN": "build the GAN with its generator and discriminator, then gan.load_params(path)",
    "Seq2Seq": "model_zoo.char_seq2seq.Seq2Seq(...).load_params(path)",
    "CharLM": "model_zoo.char_lm.CharLM(...).load_params(path)",
}


def load_model(path: str | Path, *, custom_objects: dict[str, type[Layer]] | None = None, backend: str | None = None,
               **transformer_options: Any) -> Model:
    """Rebuild the ``Model`` saved by ``Model.save_params``: layers, weights, epoch and history.

    Args:
        path: the checkpoint (HDF5).
        custom_objects: layer classes defined outside neon, by class name (a user's own layer
            is also found once its module is imported).
        backend: the transformer backend of the new model (default: ``$NG_BACKEND``, else numpy; see ``Model``).
        **transformer_options: passed to ``ng.transformers.make_transformer`` (``seed``...).

    Returns:
        a built model holding the saved weights; ``predict`` gives what the saved model gave.

    Raises:
        CheckpointError: naming the file — missing, unreadable or damaged; written by something
            other than ``Model.save_params`` (a GAN, a character model); without layer configs
            or an input shape; configs that do not rebuild; weights that do not fit the layers.

    Example:
        >>> model = load_model("out/resnet_cifar10/resnet20.h5")
        >>> model.epoch
        182
    """
    path = Path(path)
    data = read_checkpoint(path)
    layers = _rebuild_layers(path, data, custom_objects)
    if data.input_shape is None:
        raise CheckpointError(f"{path}: records no input shape, so the model cannot be built; hint: build the model "
                              "yourself (model.build(input_shape)) and call model.load_params(path)")
    model = Model(layers, backend=backend, **transformer_options)
    model.build(data.input_shape, kind=_input_kind(path, data))
    model.restore(path, data, optimizer_state=False)  # the weights, epoch, history and random streams
    return model


def _rebuild_layers(path: Path, data: CheckpointData, custom_objects: dict[str, type[Layer]] | None) -> Layer:
    """The layers from the file's first model record, or a ``CheckpointError`` saying why not."""
    record = data.model[0] if data.model else None
    if not isinstance(record, dict) or not isinstance(record.get("class_name"), str):
        raise CheckpointError(f"{path}: expected the layers' config as the first model record, received "
                              f"{_describe(record)}; hint: load_model reads files written by Model.save_params")
    name = record["class_name"]
    if name in _OTHER_OWNERS:
        raise CheckpointError(f"{path}: expected a Model checkpoint, received one written by {name}; hint: "
                              f"{_OTHER_OWNERS[name]}")
    if name not in {**layer_classes(), **(custom_objects or {})}:
        raise CheckpointError(f"{path}: expected a layer class as the top layer, received {name!r}; hint: import the "
                              "module that defines it, or pass custom_objects={name: cls}")
    if "config" not in record:
        raise CheckpointError(f"{path}: the {name} layers were saved without their config (their get_config "
                              "failed at save time); hint: build the model in code and call model.load_params(path)")
    try:
        return deserialize_layer(record, custom_objects=custom_objects, memo={})
    except LayerError as exc:
        raise CheckpointError(f"{path}: the saved layer configs do not rebuild: {exc}") from exc


def _input_kind(path: Path, data: CheckpointData) -> str:
    """The input kind the model was built for (``"dense"`` when the file predates the record)."""
    kinds = [m["input_kind"] for m in data.model[1:] if isinstance(m, dict) and "input_kind" in m]
    if not kinds:
        return "dense"
    if kinds[0] not in KINDS:
        raise CheckpointError(f"{path}: expected an input kind among {KINDS}, received {kinds[0]!r}; hint: the "
                              "checkpoint's meta was edited or damaged")
    return kinds[0]


def _describe(record: Any) -> str:
    if record is None:
        return "no model record"
    if isinstance(record, dict):
        return f"a record with keys {sorted(map(str, record))[:6]}"
    return f"a {type(record).__name__}"
