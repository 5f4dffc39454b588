"""The model zoo: recipes runnable as scripts (``python -m model_zoo.<name>``) and as functions."""

# Re-exported lazily: an eager import would load each recipe module before ``python -m`` runs
# it as ``__main__`` (runpy's "found in sys.modules" warning, and two copies of the module).
_EXPORTS = {
    "ResNetConfigError": ("resnet_cifar10", "ResNetConfigError"),
    "paper_schedule": ("resnet_cifar10", "paper_schedule"),
    "resnet_cifar10": ("resnet_cifar10", "resnet_cifar10"),
    "train_resnet_cifar10": ("resnet_cifar10", "train"),
    "train_dcgan_mnist": ("dcgan_mnist", "train"),
    "train_ctc_speech": ("ctc_speech", "train"),
    "train_lstm_sentiment": ("lstm_sentiment", "train"),
    "train_transformer_sentiment": ("transformer_sentiment", "train"),
    "train_char_seq2seq": ("char_seq2seq", "train"),
    "train_char_lm": ("char_lm", "train"),
    "train_char_transformer": ("char_transformer", "train"),
    "train_dqn_cartpole": ("dqn_cartpole", "train"),
    "train_dqn_atari": ("dqn_atari", "train"),
}


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'model_zoo' has no attribute {name!r}")
    from importlib import import_module

    source = _EXPORTS[name][0]
    module = import_module(f"{__name__}.{source}")
    # importing the submodule binds its name on this package: the function of the same name
    # (resnet_cifar10) must win, so every export of that module is bound here now
    globals().update({key: getattr(module, attr) for key, (mod, attr) in _EXPORTS.items() if mod == source})
    return globals()[name]


__all__ = sorted(_EXPORTS)
