"""``load_model``: a whole ``Model`` back from a checkpoint, with no code that rebuilds its layers.

``Model.save_params`` writes, besides the weights, the layers' configs (``meta.model[0]``:
``{"class_name", "config"}`` as ``serialize_layer`` gives it), the input kind
(``meta.model[1]``), one sample's shape and the epoch. ``load_model`` reads the file once (in
the sandboxed reader of ``neon.saving``), rebuilds the layers with ``deserialize_layer``, builds
the model for the recorded input shape and kind, and writes the weights, epoch and history
into it (``TrainingOwner.restore``, as ``Model.load_params`` does). The optimizer is not part
of a model's config, so its state stays in the file: pass ``resume_from=`` to ``fit`` to
continue training with it.

**Sizes are checked before anything is built.** A file's layer configs are untrusted: a config
saying ``nout=2**32`` must not make this process allocate 2**32 rows. Before any layer is
built, every size-like field of every config (``nout``, ``vocab_size``, ``embedding_dim``,
``fshape``, ``strides``, ``shape``...) must be ints in ``[1, max_elements]`` (padding
``[0, max_elements]``) and one input sample at most ``max_elements`` elements (a sequence at most
``MAX_STEPS`` steps). The layers are then built *for their shapes only*
(``neon.initializers.shapes_only``: no initial value is filled or allocated), and the variables
they would hold must each have at most ``max_elements`` elements, together at most
``max_parameters``, and exactly the shapes the file stores; only then are the stored weights
written in (they replace every value, so no initializer ever runs). A config that disagrees with
its weights thus costs no more memory than the weights themselves.

**Other model classes.** A ``GAN``, a ``DQNAgent`` and ``model_zoo``'s ``Seq2Seq`` and ``CharLM``
write their own first model record (``{"class_name": "GAN", "noise_dim", "generator", ...}``).
Each such class registers itself (``TrainingOwner.from_record``, ``neon.registry``) and is found
by the record's name; its record passes the same size checks (its layer configs, and its own
size fields such as ``hidden`` or ``noise_dim``), ``from_record`` builds it for its shapes only,
and its variables are checked against the bounds and the stored weights before any is written.
A file of an older format, or of a class that cannot rebuild itself, is a ``CheckpointError``
saying how to load it in code.

Example:
    >>> model = load_model("out/mnist_mlp.h5")
    >>> model.predict(X_test).argmax(axis=1)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from .initializers import shapes_only
from .inputs import KINDS
from .layers import Layer, LayerError, deserialize_layer, layer_classes
from .layers.serialization import short_repr
from .model import Model, ModelError
from .registry import model_class, model_classes
from .saving import CheckpointData, CheckpointError, check_entries, read_checkpoint
from .training import TrainingOwner

__all__ = ["MAX_ELEMENTS", "MAX_PARAMETERS", "MAX_STEPS", "check_config_sizes", "load_model"]

MAX_ELEMENTS = 2**31  # default bound of one variable, one size field and one input sample (8 GiB of float32)
MAX_PARAMETERS = 2**31  # default bound of all the variables' elements together
MAX_STEPS = 2**20  # time steps of one sequence sample: a recurrent reduction builds an index array of them
POSITIVE_FIELDS = ("nout", "vocab_size", "embedding_dim", "fshape", "strides", "dilation", "depth", "groups",
                   "shape", "hidden", "noise_dim", "n_actions")  # size-like config fields: ints >= 1 (or lists)
PADDING_FIELDS = ("padding", "output_padding")  # ints >= 0 (or "same"/"valid", or (before, after) pairs)
_EDITED = "hint: the file's layer configs were edited or damaged"


def load_model(path: str | Path, *, custom_objects: dict[str, type[Layer]] | None = None, backend: str | None = None,
               max_elements: int = MAX_ELEMENTS, max_parameters: int = MAX_PARAMETERS,
               **transformer_options: Any) -> TrainingOwner:
    """Rebuild the model a ``save_params`` wrote: layers, weights, epoch and history.

    A ``Model`` file gives a ``Model``; a file of another registered model class (``GAN``,
    ``DQNAgent``, ``model_zoo``'s ``Seq2Seq`` and ``CharLM``) gives that class, rebuilt by its
    ``from_record`` under the same size checks. The optimizer state stays in the file.

    Args:
        path: the checkpoint (HDF5).
        custom_objects: layer classes defined outside neon, by class name (a user's own layer
            is also found once its module is imported).
        backend: the transformer backend of the new model (default: ``$NG_BACKEND``, else numpy; see ``Model``).
        max_elements: the most elements one variable, one size field of a layer config or one input
            sample may have (default ``MAX_ELEMENTS``, 2**31).
        max_parameters: the most elements all the model's variables may have together (default
            ``MAX_PARAMETERS``, 2**31).
        **transformer_options: passed to ``ng.transformers.make_transformer`` (``seed``...).

    Returns:
        a built model holding the saved weights (a ``Model``: ``predict`` gives what the saved model
        gave; a ``GAN``: ``generate``; a ``DQNAgent``: ``act``...).

    Raises:
        CheckpointError: naming the file — missing, unreadable or damaged; written by something
            by a class that does not rebuild itself or an older format of one; without layer configs
            or an input shape; configs that do not rebuild; a size field, input sample or variable
            over the bounds; configs whose variables do not have the stored weights' shapes (all
            checked before any variable is allocated).
        ModelError: ``max_elements`` or ``max_parameters`` is not a positive int.

    Example:
        >>> model = load_model("out/resnet_cifar10/resnet20.h5")
        >>> model.epoch
        182
    """
    for what, value in (("max_elements", max_elements), ("max_parameters", max_parameters)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"load_model: expected {what} as a positive int, received {short_repr(value)}; "
                             f"hint: e.g. {what}=2**32")
    path = Path(path)
    data = read_checkpoint(path)
    owner = _owner_class(data, custom_objects)
    if owner is not None:
        return _load_owner(path, data, owner, custom_objects, backend, max_elements, max_parameters,
                           transformer_options)
    layers = _rebuild_layers(path, data, custom_objects, max_elements)
    if data.input_shape is None:
        raise CheckpointError(f"{path}: records no input shape, so the model cannot be built; hint: build the model "
                              "yourself (model.build(input_shape)) and call model.load_params(path)")
    kind = _input_kind(path, data)
    _check_input_shape(path, data.input_shape, kind, max_elements)
    model = Model(layers, backend=backend, **transformer_options)
    try:  # the graph and the variables' shapes; no initial value is filled
        with shapes_only():
            model.build(data.input_shape, kind=kind)
    except ng.NgraphError as exc:
        raise CheckpointError(f"{path}: expected layer configs that build for the saved input shape "
                              f"{data.input_shape}, received configs that do not ({exc}); {_EDITED}") from exc
    _check_variables(path, model, data.params, max_elements, max_parameters)
    model.restore(path, data, optimizer_state=False)  # the weights (every value), epoch, history and random streams
    return model


def _owner_class(data: CheckpointData, custom_objects: dict[str, type[Layer]] | None) -> type[TrainingOwner] | None:
    """The registered model class the file's first record names (a layer class name wins: a Model file)."""
    record = data.model[0] if data.model else None
    name = record.get("class_name") if isinstance(record, dict) else None
    if not isinstance(name, str) or name in layer_classes() or name in (custom_objects or {}):
        return None
    return model_class(name)


def _load_owner(path: Path, data: CheckpointData, cls: type[TrainingOwner], custom_objects: Any,
                backend: str | None, max_elements: int, max_parameters: int,
                options: dict[str, Any]) -> TrainingOwner:
    """A registered model class's file: sizes checked, built shapes only, variables checked, then the weights."""
    record = data.model[0]
    name = record["class_name"]
    # the record's own fields (hidden, noise_dim...) and every layer config inside it, as check_config_sizes reads them
    check_config_sizes(path, {"class_name": name, "config": {k: v for k, v in record.items() if k != "class_name"}},
                       max_elements)
    if data.input_shape is not None:
        _check_input_shape(path, data.input_shape, "dense", max_elements)
    try:  # the variables' shapes; no initial value is filled, no computation runs
        with shapes_only():
            owner = cls.from_record(record, data.input_shape, custom_objects=custom_objects, backend=backend,
                                    **options)
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    except (ng.NgraphError, TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: expected a {name} record that rebuilds the model, received one that does not "
                              f"({short_repr(str(exc))}); {_EDITED}") from exc
    _check_variables(path, owner, data.params, max_elements, max_parameters)
    owner.restore(path, data, optimizer_state=False)  # the weights (every value), epoch, history and random streams
    return owner


def _rebuild_layers(path: Path, data: CheckpointData, custom_objects: dict[str, type[Layer]] | None,
                    max_elements: int) -> Layer:
    """The layers from the file's first model record, or a ``CheckpointError`` saying why not."""
    record = data.model[0] if data.model else None
    if not isinstance(record, dict) or not isinstance(record.get("class_name"), str):
        raise CheckpointError(f"{path}: expected the layers' config as the first model record, received "
                              f"{_describe(record)}; hint: load_model reads files written by Model.save_params")
    name = record["class_name"]
    if name not in {**layer_classes(), **(custom_objects or {})}:
        raise CheckpointError(f"{path}: expected a layer class as the top layer or a model class among "
                              f"{sorted(model_classes())}, received {name!r}; hint: import the module that defines "
                              "it (a model class registers itself), or pass custom_objects={name: cls} for a layer")
    if "config" not in record:
        raise CheckpointError(f"{path}: the {name} layers were saved without their config (their get_config "
                              "failed at save time); hint: build the model in code and call model.load_params(path)")
    check_config_sizes(path, record, max_elements)
    try:
        return deserialize_layer(record, custom_objects=custom_objects, memo={})
    except LayerError as exc:
        raise CheckpointError(f"{path}: the saved layer configs do not rebuild: {exc}; {_EDITED}") from exc


def check_config_sizes(path: str | Path, record: Any, max_elements: int = MAX_ELEMENTS) -> None:
    """Check every size-like field of every layer config in ``record`` (containers' children too).

    ``POSITIVE_FIELDS`` must hold ints in ``[1, max_elements]``, ``PADDING_FIELDS`` ints in
    ``[0, max_elements]`` (one int, or lists of them); other values (a ``"same"`` padding, a
    ``None`` stride) are left to the layers' constructors. The walk uses an explicit stack.

    Raises:
        CheckpointError: naming the file, the layer, the field, the bound and the value.

    Example:
        >>> check_config_sizes("m.h5", {"class_name": "Affine", "config": {"nout": 2**40}})  # CheckpointError
    """
    stack, seen = [record], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > 4_000_000:  # meta is at most 16 MiB of JSON, so never reached by a file's configs
            raise CheckpointError(f"{path}: expected layer configs of at most 4000000 values, received more; "
                                  f"{_EDITED}")
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        stack.extend(node.values())
        config = node.get("config")
        if not isinstance(node.get("class_name"), str) or not isinstance(config, dict):
            continue
        for field in (*POSITIVE_FIELDS, *PADDING_FIELDS):
            low = 0 if field in PADDING_FIELDS else 1
            if field in config and not all(low <= n <= max_elements for n in _ints(config[field])):
                name = config.get("name") if isinstance(config.get("name"), str) else "unnamed"
                raise CheckpointError(
                    f"{path}: layer {name[:60]} ({node['class_name'][:60]}): expected {field} as ints in "
                    f"[{low}, {max_elements}], received {short_repr(config[field])}; nothing was built; {_EDITED}, "
                    "or pass a larger max_elements to load_model if the model is genuine")


def _ints(value: Any, depth: int = 0) -> list[int]:
    """The ints in ``value``: itself, or those of a list (of lists, two levels: padding pairs)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return [int(value)]
    if isinstance(value, list) and depth < 2:
        return [n for v in value for n in _ints(v, depth + 1)]
    return []


def _check_input_shape(path: Path, shape: tuple[int, ...], kind: str, max_elements: int) -> None:
    """One sample of at most ``max_elements`` elements; a sequence ``(T,)`` of tokens or ``(F, T)`` frames."""
    dims = {"tokens": 1, "frames": 2}.get(kind)
    if dims is not None and len(shape) != dims:
        raise CheckpointError(f"{path}: expected the input shape of {kind} as {'(T,)' if dims == 1 else '(F, T)'}, "
                              f"received {shape}; hint: the checkpoint's meta was edited or damaged")
    if math.prod(shape) > max_elements:
        raise CheckpointError(f"{path}: expected an input sample of at most max_elements={max_elements} elements, "
                              f"received input_shape {shape}; nothing was built; hint: the checkpoint's meta was "
                              "edited or damaged, or pass a larger max_elements to load_model if the model is genuine")
    if dims is not None and shape[-1] > MAX_STEPS:
        raise CheckpointError(f"{path}: expected {kind} sequences of at most MAX_STEPS={MAX_STEPS} steps, received "
                              f"input_shape {shape}; nothing was built; hint: the checkpoint's meta was edited or "
                              "damaged (the steps are only the saved sample's: a loaded model takes any length)")


def _check_variables(path: Path, model: TrainingOwner, stored: dict[str, np.ndarray], max_elements: int,
                     max_parameters: int) -> None:
    """The variables the configs built (shapes only) against the bounds and the stored weights' shapes."""
    params, _ = model.checkpoint_keys()
    total = 0
    for key, var in params.items():
        shape = var.axes.lengths
        size = math.prod(shape)
        total += size
        scope = var.meta.scope
        layer = "/".join(e.name for e in scope) + (f" ({scope[-1].kind})" if scope and scope[-1].kind else "")
        if size > max_elements:
            raise CheckpointError(f"{path}: layer {layer}: the configs make variable {key.rsplit('/', 1)[-1]} of shape "
                                  f"{shape} ({size} elements), expected at most max_elements={max_elements}; nothing "
                                  f"was allocated; {_EDITED}, or pass a larger max_elements if the model is genuine")
        if key in stored and stored[key].shape != shape:
            raise CheckpointError(f"{path}: params/{key} has shape {stored[key].shape}, expected {shape} from the "
                                  f"configs of layer {layer}; nothing was allocated; {_EDITED}: its configs and "
                                  "weights disagree")
    if total > max_parameters:
        raise CheckpointError(f"{path}: the layer configs make {total} parameters, expected at most "
                              f"max_parameters={max_parameters}; nothing was allocated; {_EDITED}, or pass a larger "
                              "max_parameters if the model is genuine")
    check_entries(path, "params", params, stored)  # keys missing or unexpected, dtypes


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
