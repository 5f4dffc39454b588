"""What the ``neon`` and ``ngraph`` commands share: parsers, exit codes, and error reporting.

Exit codes: 0 success; 1 an error from our code — ``NgraphError`` (``CheckpointError``,
``SerializationError``...) or a file that cannot be read — printed as ``error: ...`` with a
``hint:``, without a traceback unless ``--debug``; 2 bad arguments (argparse's usage errors, an
unknown recipe, a malformed selector query); 130 stopped with Ctrl-C. Any other exception is a
bug and keeps its traceback.

Example:
    >>> parser = command_parser("ngraph", "Inspect saved graphs and models.", EXAMPLES)
    >>> return run_command(parser, argv)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ngraph_core as ng

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped with Ctrl-C

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CommandError", "UsageError", "add_subcommand",
           "command_parser", "non_negative_int", "positive_int", "run_command"]


class CommandError(ng.NgraphError, ValueError):
    """A command cannot do what was asked (a file of an unknown kind, a recipe without an argparse ``main``):
    exit code 1."""


class UsageError(ng.NgraphError, ValueError):
    """Arguments that parse but cannot be used (an unknown recipe, a flag a recipe lacks): exit code 2.

    Attributes:
        parser: the (sub)command's parser, whose usage line is printed with the message.
    """

    def __init__(self, message: str, parser: argparse.ArgumentParser | None = None) -> None:
        super().__init__(message)
        self.parser = parser


def _debug_flag(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--debug", action="store_true", default=default,
                        help="show the full traceback of an error")


def command_parser(prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """The top-level parser of a command, with ``--debug`` and required subcommands.

    Args:
        prog: the command's name (``neon``, ``ngraph``).
        description: one line saying what the command does.
        epilog: examples, shown verbatim under ``--help``.

    Returns:
        the parser; add subcommands with ``add_subcommand``.

    Example:
        >>> parser = command_parser("ngraph", "Inspect saved graphs.", "examples:\\n  ngraph info m.h5")
    """
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _debug_flag(parser, False)
    parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return parser


def add_subcommand(parent: argparse.ArgumentParser, name: str, description: str, examples: Sequence[str],
                   handler: Callable[[argparse.Namespace], int] | None = None) -> argparse.ArgumentParser:
    """A subcommand of ``parent`` with a one-line description, examples, and its own ``--debug``.

    Args:
        parent: a parser made by ``command_parser`` (or a subcommand that has subcommands).
        name: the subcommand (``info``).
        description: one line; also its entry in the parent's ``--help``.
        examples: command lines shown under ``--help``.
        handler: ``handler(args) -> exit code``; None for a group of subcommands (``neon zoo``).

    Returns:
        the subcommand's parser.

    Example:
        >>> info = add_subcommand(parser, "info", "Summarize a saved model.", ["ngraph info m.h5"], run_info)
    """
    actions = next(a for a in parent._actions if isinstance(a, argparse._SubParsersAction))
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    sub = actions.add_parser(name, help=description, description=description, epilog=epilog,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    _debug_flag(sub, argparse.SUPPRESS)  # SUPPRESS: "neon --debug info m.h5" is not undone by the subcommand
    if handler is None:
        sub.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")
    else:
        sub.set_defaults(handler=handler, parser=sub)
    return sub


def positive_int(text: str) -> int:
    """argparse ``type=`` for counts (epochs, batch sizes): an int of at least 1.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse turns it into a usage error, exit code 2).

    Example:
        >>> parser.add_argument("--epochs", type=positive_int)
    """
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse ``type=`` for depths and offsets: an int of at least 0.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse turns it into a usage error, exit code 2).

    Example:
        >>> parser.add_argument("--collapse", type=non_negative_int)
    """
    return _int_at_least(text, 0, "an integer >= 0")


def _int_at_least(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, received {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, received {value}")
    return value


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                extra: dict[str, Any] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand's handler; the exit code.

    Errors become messages on stderr: usage errors exit 2 (with the usage line), errors from
    our code and unreadable files exit 1 as ``error: ...`` and a hint, with the traceback
    only under ``--debug`` (where the exception propagates).

    Args:
        parser: from ``command_parser``.
        argv: the arguments (default ``sys.argv[1:]``).
        extra: attributes set on the parsed arguments (``neon train``'s recipe arguments).

    Returns:
        0, 1 or 2 (or a recipe's own exit code, for ``neon train``).

    Example:
        >>> sys.exit(run_command(parser, None))
    """
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already printed)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    for key, value in (extra or {}).items():
        setattr(args, key, value)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"{args.parser.prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        code = _exit_code(exc)
        if code is None:
            raise  # not ours: a bug, which deserves its traceback
        if isinstance(exc, UsageError):
            (exc.parser or args.parser).print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: {_message(exc)}", file=sys.stderr)
        if "hint:" not in str(exc):
            print(f"hint: {_hint(exc)}", file=sys.stderr)
        return code


def _exit_code(exc: BaseException) -> int | None:
    if isinstance(exc, (UsageError, ng.SelectorError)):
        return EXIT_USAGE
    if isinstance(exc, (ng.NgraphError, OSError)):
        return EXIT_ERROR
    return None


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def _hint(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "check the path (relative paths start from the current directory)"
    if isinstance(exc, IsADirectoryError):
        return "expected a file, received a directory: name the file inside it"
    if isinstance(exc, OSError):
        return "check the file's permissions and the disk"
    return "run again with --debug for the full traceback"


def random_input(spec: Any, rng: np.random.Generator) -> np.ndarray:
    """A random array for an input ``spec`` (``TensorSpec``): normal floats, zeros for ids and lengths."""
    if np.issubdtype(np.dtype(spec.dtype), np.floating):
        return rng.standard_normal(spec.shape).astype(spec.dtype)
    return np.zeros(spec.shape, dtype=spec.dtype)  # ids and lengths: zeros are valid for any table


def print_counters(compiled: ng.inference.CompiledModel, what: str, runs: int = 20) -> None:
    """Run a profiled executor of ``compiled`` ``runs`` times on random inputs and print its per-layer counters
    (``bench -pc``), headed ``Performance counters (<runs> runs of <what>):``."""
    executor = compiled.new_executor(profile=True)
    inputs = [random_input(spec, np.random.default_rng(0)) for spec in compiled.inputs]
    for _ in range(runs):
        executor(*inputs)
    print(f"\nPerformance counters ({runs} runs of {what}):")
    print(ng.inference.format_counters(ng.inference.collect_counters(executor)))
    executor.close()
