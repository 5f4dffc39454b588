"""The ``neon`` command: list and train ``model_zoo`` recipes, and inspect saved models.

Example:
    $ neon zoo list
    $ neon train char_seq2seq --epochs 4 --out out/s2s -- --task sort --n-train 10000
    $ neon info out/s2s/model.h5
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .common import add_subcommand, command_parser, positive_int, run_command
from .info import add_info_arguments, run_info
from .zoo import RECIPES, run_list, run_train

__all__ = ["build_parser", "main"]

DESCRIPTION = "neon: train model_zoo recipes and inspect models saved with Model.save_params."
EXAMPLES = """examples:
  neon zoo list
  neon train char_seq2seq --epochs 4 --out out/s2s -- --task sort --n-train 10000 --n-test 300
  neon info out/model.h5
  neon <command> --help"""


def build_parser() -> argparse.ArgumentParser:
    """The ``neon`` command's parser (subcommands ``zoo list``, ``train``, ``info``).

    Example:
        >>> build_parser().parse_args(["info", "m.h5"]).path
        'm.h5'
    """
    parser = command_parser("neon", DESCRIPTION, EXAMPLES)
    zoo = add_subcommand(parser, "zoo", "The model_zoo recipes.", ["neon zoo list"])
    add_subcommand(zoo, "list", "List the recipes: what each trains and the data it needs.", ["neon zoo list"],
                   run_list)

    train = add_subcommand(parser, "train", "Train a model_zoo recipe (arguments after -- go to the recipe).", [
        "neon train char_seq2seq --epochs 4 --out out/s2s -- --task sort --n-train 10000 --n-test 300",
        "neon train resnet_cifar10 --epochs 182 --data-dir ~/data/cifar-10-batches-bin",
        "mpiexec -n 2 neon train resnet_cifar10 --distributed --epochs 3   # data-parallel over MPI",
        "neon train resnet_cifar10 --backend cupy --epochs 3          # on a GPU (CuPy)",
        "neon train lstm_sentiment -- --help        # the recipe's own arguments",
    ], run_train)
    train.add_argument("recipe", help=f"one of: {', '.join(RECIPES)}")
    train.add_argument("--epochs", type=positive_int, default=None, help="epochs to train")
    train.add_argument("--batch-size", type=positive_int, default=None, help="samples per training step")
    train.add_argument("--data-dir", default=None, help="where the recipe's data is (see 'neon zoo list')")
    train.add_argument("--out", default=None, help="the folder the recipe writes its checkpoint and figures to")
    train.add_argument("--distributed", action="store_true", default=None,
                       help="data-parallel training over MPI (launch under mpiexec -n N; --batch-size is per rank)")
    train.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="a tqdm bar (batches; environment steps for DQN); default: when stderr is a terminal, "
                            "else one line per epoch")
    train.add_argument("--backend", choices=("numpy", "cupy", "auto"), default=None,
                       help="the transformer every model of the recipe runs on (sets NG_BACKEND; cupy: a GPU, "
                            "auto: the GPU when one is usable, else NumPy)")

    info = add_subcommand(parser, "info", "Summarize a saved model: layers, parameters, ops, memory plan.", [
        "neon info out/resnet_cifar10/resnet20.h5",
        "neon info model.h5 --batch-size 32       # ops and memory plan for 32 samples",
    ], run_info)
    add_info_arguments(info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``neon`` command; returns its exit code (0 ok, 1 error, 2 bad arguments).

    Args:
        argv: the arguments (default ``sys.argv[1:]``); for ``train``, those after ``--`` go to the recipe.

    Returns:
        the exit code.

    Example:
        >>> main(["zoo", "list"])
        0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    head, recipe_args = argv, []
    if "--" in argv:
        cut = argv.index("--")
        if next((a for a in argv[:cut] if not a.startswith("-")), None) == "train":  # the first word: the command
            head, recipe_args = argv[:cut], argv[cut + 1:]  # split here: argparse would mix them with the recipe
    return run_command(build_parser(), head, extra={"recipe_args": recipe_args})
