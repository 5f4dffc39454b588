"""The regression corpus is present: a fuzz test replaying an empty folder would pass vacuously
(``*.h5`` is git-ignored; ``.gitignore`` re-includes ``tests/fuzz_corpus/``)."""

from __future__ import annotations

import pytest
from fuzzing import corpus


@pytest.mark.parametrize("target", ["checkpoint", "idx", "graph_json", "layer_config", "load_model"])
def test_corpus_has_the_inputs_that_once_broke_the_loaders(target: str) -> None:
    assert corpus(target), f"tests/fuzz_corpus/{target}/ is empty; hint: check that git tracks its files"
