"""Saving and loading models — every model class the project has (``Model``, ``GAN``, ``DQNAgent``,
``model_zoo``'s ``CharLM`` and ``Seq2Seq``) saves and loads through this module.

* **What a model contributes.** Its checkpoint keys (``checkpoint_keys``: ``checkpoint_keys(variables,
  optimizers)`` here for most), its first model record (plain data: layer configs and settings,
  passed to ``save_checkpoint``), its random streams (``random_streams``/``restore_random_streams``)
  and, to be rebuilt by ``load_model``, a ``from_record`` classmethod (``neon.registry``).
* **Saving** — ``save_checkpoint(owner, ...)``: the weights (refused when they hold NaN or inf
  unless ``allow_non_finite``), the optimizers' state, the epoch, the history, the model record and
  the random streams, written atomically.
* **Loading into a model** — ``restore_checkpoint(owner, ...)`` checks every field against the model
  before anything is written; ``load_params(owner, path, ...)`` reads the file, lets the model build
  itself from it when it has no variables yet, then restores. ``fit(resume_from=...)`` restores
  through the model's ``restore``, which calls ``restore_checkpoint``.
* **Loading a whole model** — ``load_model(path)``: no code that rebuilds the layers (below).

The file format (HDF5 layout, atomic writes, checksums) is ``neon/checkpoint_file.py``, whose
names are re-exported here; reading an untrusted file is ``neon/checkpoint_reader.py``, a separate
low-level reader run in a child process (HDF5 never parses a user's file in this process).

**load_model.** ``Model.save_params`` writes, besides the weights, the layers' configs
(``meta.model[0]``: ``{"class_name", "config"}`` as ``serialize_layer`` gives it), the input kind
(``meta.model[1]``), one sample's shape and the epoch. ``load_model`` reads the file once (in
the sandboxed reader), rebuilds the layers with ``deserialize_layer``, builds the model for the
recorded input shape and kind, and writes the weights, epoch and history into it (the model's
``restore``, as ``Model.load_params`` does). The optimizer is not part of a model's config, so its
state stays in the file: pass ``resume_from=`` to ``fit`` to continue training with it.

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
saying how to load it in code. ``Model`` itself is found through the registry too
(``layers_model_class``), so this module imports no model class.

Example:
    >>> model.save_params("out/mnist_mlp.h5")          # save_checkpoint(model, ...)
    >>> model = load_model("out/mnist_mlp.h5")
    >>> model.predict(X_test).argmax(axis=1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from .callbacks import History
from .checkpoint_file import (
    CheckpointData,
    CheckpointError,
    atomic_path,
    check_checkpoint_data,
    read_checkpoint,
    remove_stale_temporaries,
    variable_keys,
    write_checkpoint,
)
from .initializers import shapes_only
from .inputs import KINDS
from .layers import Layer, LayerError, deserialize_layer, layer_classes
from .layers.serialization import short_repr
from .model_inspection import ModelError
from .registry import layers_model_class, model_class, model_classes

__all__ = ["MAX_ELEMENTS", "MAX_PARAMETERS", "MAX_STEPS", "CheckpointData", "CheckpointError", "atomic_path",
           "check_checkpoint_data", "check_config_sizes", "check_entries", "checkpoint_keys", "load_model",
           "load_params", "read_checkpoint", "remove_stale_temporaries", "restore_checkpoint", "save_checkpoint",
           "variable_keys", "weights_finite", "write_checkpoint"]


# -- what a model saves ------------------------------------------------------------------------------------
def checkpoint_keys(variables: Sequence[ng.Op], optimizers: Iterable[Any]) -> tuple[dict[str, ng.Op],
                                                                                      dict[str, ng.Op]]:
    """Checkpoint key -> variable for the model's ``variables``, then for the state of its ``optimizers``.

    Keys are ``variable_keys`` (scope paths); the optimizers' state variables (``state_variables``)
    are keyed after the weights, in the optimizers' order (None entries are skipped).

    Example:
        >>> params, state = checkpoint_keys(model.variables, [model.optimizer])
    """
    state: list[ng.Op] = []
    for opt in optimizers:
        if opt is not None:
            state += list(getattr(opt, "state_variables", []))
    params, opt_keys = variable_keys(variables, state)
    return params, opt_keys


def save_checkpoint(owner: Any, path: str | Path, input_shape: Sequence[int], model: list[Any],
                    allow_non_finite: bool = False) -> None:
    """Write ``owner``'s weights, optimizers' state, epoch, history, random streams and ``model`` (plain
    data describing the model) to an HDF5 checkpoint, atomically (``neon.checkpoint_file``).

    Args:
        owner: the model (``checkpoint_keys``, ``transformer``, ``epoch``, ``history``, ``random_streams``).
        path: the file.
        input_shape: one sample's shape (recorded for ``load_model``).
        model: the model records (the first names the class and holds what rebuilds it).
        allow_non_finite: write weights holding NaN or inf too.

    Raises:
        CheckpointError: a weight holds NaN or inf (a diverged run) and not ``allow_non_finite``;
            nothing is written then, so a previous file stays. The file cannot be written.

    Example:
        >>> save_checkpoint(model, "out/m.h5", (784,), [{"class_name": "Sequential", "config": ...}])
    """
    params, opt = owner.checkpoint_keys()
    t = owner.transformer

    def values(keys: dict[str, ng.Op]) -> dict[str, np.ndarray]:
        return {key: t.read_variable(v).astype(v.dtype, copy=False) for key, v in keys.items()}

    weights = values(params)
    bad = [key for key, value in weights.items() if np.issubdtype(value.dtype, np.inexact)
           and not np.isfinite(value).all()]
    if bad and not allow_non_finite:
        stopped = getattr(getattr(owner, "history", None), "stopped", None)
        why = f" ({stopped.by} stopped training in epoch {stopped.epoch})" if stopped is not None else ""
        raise CheckpointError(f"{path}: expected finite weights, received NaN or inf in {len(bad)} of "
                              f"{len(weights)} ({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''}){why}; "
                              "nothing was written; hint: training diverged: lower the learning rate or clip "
                              "gradients and train again, or save_params(path, allow_non_finite=True) to keep "
                              "them for debugging")
    write_checkpoint(path, CheckpointData(params=weights, optimizer=values(opt), epoch=owner.epoch,
                                          input_shape=tuple(input_shape), history=owner.history.as_dict(),
                                          model=model, rng=owner.random_streams()))


def weights_finite(owner: Any) -> bool:
    """True when every weight and optimizer state value of ``owner`` is finite (no NaN, no inf)."""
    params, opt = owner.checkpoint_keys()
    return all(np.isfinite(owner.transformer.read_variable(v)).all() for v in (*params.values(), *opt.values()))


# -- loading into a model ----------------------------------------------------------------------------------
def restore_checkpoint(owner: Any, path: str | Path, data: CheckpointData | None = None,
                       optimizer_state: bool = True) -> None:
    """Write a checkpoint's weights, epoch, history, random streams and (``optimizer_state``, when an
    optimizer is bound) its optimizer state into ``owner``. Every field is checked before anything is written.

    Args:
        owner: the model (``checkpoint_keys``, ``optimizers``, ``transformer``, the random-stream methods).
        path: the file (read unless ``data`` is given; named in errors).
        data: the file's contents, already read.
        optimizer_state: also restore the optimizers' state (when the file has any and one is bound).

    Raises:
        CheckpointError: a file that does not fit the model or its optimizers.

    Example:
        >>> restore_checkpoint(model, "out/last.h5")
    """
    path = Path(path)
    data = check_checkpoint_data(path, read_checkpoint(path) if data is None else data)  # every field first
    history = History.from_saved(data.history)
    params, opt = owner.checkpoint_keys()
    check_entries(path, "params", params, data.params)
    with_state = optimizer_state and bool(data.optimizer) and bool(owner.optimizers())
    if with_state:
        check_entries(path, "optimizer", opt, data.optimizer)
    owner.check_random_streams(data.rng)
    for key, var in params.items():
        owner.transformer.write_variable(var, data.params[key])
    if with_state:
        for key, var in opt.items():
            owner.transformer.write_variable(var, data.optimizer[key])
    owner.epoch = data.epoch
    owner.history = history
    owner.restore_random_streams(data.rng)


def load_params(owner: Any, path: str | Path, optimizer_state: bool = True,
                build: Callable[[Path, CheckpointData], None] | None = None) -> None:
    """Read a checkpoint and restore it into ``owner`` (through its ``restore``).

    Args:
        owner: the model.
        path: the checkpoint.
        optimizer_state: also restore the optimizers' state.
        build: ``build(path, data)`` builds an unbuilt model from what the file records (its input
            shape) before anything is restored; None: the model is built already.

    Raises:
        CheckpointError: naming the file and the key (nothing is written into the model then).

    Example:
        >>> load_params(agent, "dqn.h5")
    """
    path = Path(path)
    data = read_checkpoint(path)
    if build is not None:
        build(path, data)
    owner.restore(path, data, optimizer_state)


def check_entries(path: str | Path, group: str, expected: dict[str, ng.Op], found: dict[str, np.ndarray],
                  dtype_of: Any = lambda var: var.dtype) -> None:
    """Check that a checkpoint group holds exactly the expected keys, with their shapes and dtypes.

    Args:
        path: the file (for messages).
        group: ``params`` or ``optimizer``.
        expected: key -> the variable it loads into.
        found: key -> the array read.

    Raises:
        CheckpointError: naming the file and the first missing, unexpected or mismatched key.
    """
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    if missing or unexpected:
        parts = []
        for what, keys in (("missing", missing), ("unexpected", unexpected)):
            if keys:
                parts.append(f"{what} {group}/{keys[0]}" + (f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""))
        raise CheckpointError(f"{path}: the checkpoint does not fit this model: {'; '.join(parts)}; expected keys "
                              f"like {sorted(expected)[:3]}; hint: it was saved from a different architecture")
    for key, var in expected.items():
        array = found[key]
        if array.shape != var.axes.lengths:
            raise CheckpointError(f"{path}: {group}/{key} has shape {array.shape}, expected {var.axes.lengths} "
                                  "for this model; hint: it was saved from a different architecture")
        if array.dtype != np.dtype(dtype_of(var)):
            raise CheckpointError(f"{path}: {group}/{key} has dtype {array.dtype}, expected {dtype_of(var)}")


# -- loading a whole model --------------------------------------------------------------------------------
MAX_ELEMENTS = 2**31  # default bound of one variable, one size field and one input sample (8 GiB of float32)
MAX_PARAMETERS = 2**31  # default bound of all the variables' elements together
MAX_STEPS = 2**20  # time steps of one sequence sample: a recurrent reduction builds an index array of them
POSITIVE_FIELDS = ("nout", "vocab_size", "embedding_dim", "fshape", "strides", "dilation", "depth", "groups",
                   "shape", "hidden", "noise_dim", "n_actions")  # size-like config fields: ints >= 1 (or lists)
PADDING_FIELDS = ("padding", "output_padding")  # ints >= 0 (or "same"/"valid", or (before, after) pairs)
_EDITED = "hint: the file's layer configs were edited or damaged"


def load_model(path: str | Path, *, custom_objects: dict[str, type[Layer]] | None = None, backend: str | None = None,
               max_elements: int = MAX_ELEMENTS, max_parameters: int = MAX_PARAMETERS,
               **transformer_options: Any) -> Any:
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
    model = layers_model_class()(layers, backend=backend, **transformer_options)
    try:  # the graph and the variables' shapes; no initial value is filled
        with shapes_only():
            model.build(data.input_shape, kind=kind)
    except ng.NgraphError as exc:
        raise CheckpointError(f"{path}: expected layer configs that build for the saved input shape "
                              f"{data.input_shape}, received configs that do not ({exc}); {_EDITED}") from exc
    _check_variables(path, model, data.params, max_elements, max_parameters)
    model.restore(path, data, optimizer_state=False)  # the weights (every value), epoch, history and random streams
    return model


def _owner_class(data: CheckpointData, custom_objects: dict[str, type[Layer]] | None) -> type | None:
    """The registered model class the file's first record names (a layer class name wins: a Model file)."""
    record = data.model[0] if data.model else None
    name = record.get("class_name") if isinstance(record, dict) else None
    if not isinstance(name, str) or name in layer_classes() or name in (custom_objects or {}):
        return None
    return model_class(name)


def _load_owner(path: Path, data: CheckpointData, cls: type, custom_objects: Any,
                backend: str | None, max_elements: int, max_parameters: int,
                options: dict[str, Any]) -> Any:
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


def _check_variables(path: Path, model: Any, stored: dict[str, np.ndarray], max_elements: int,
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
