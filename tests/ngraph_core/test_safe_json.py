"""The one bounded JSON decoder (``ngraph_core.safe_json``): exact depth, typed errors, never a RecursionError.

``json.loads`` recurses per nesting level, so whether 980 levels parse depends on how deep the
caller already is; ``loads`` refuses them by a scan first, wherever it is called from. The
readers that use it (graph documents, ``.ngi`` manifests, checkpoint metadata, the conv-choice
record, allgather_object) are checked here too, each ending in its own typed error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from ngraph_core import safe_json
from ngraph_core.distributed.communicator import LocalCommunicator
from ngraph_core.errors import DistributedError, SerializationError
from ngraph_core.transformers.numpy import conv_choice

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) |
                    st.text(alphabet='ab[]{}"\\\n', max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=20)


class RecordError(ValueError):
    """A caller's typed error."""


def depth_of(value: Any) -> int:
    """The reference: nesting depth by recursion (fine for the small values hypothesis draws)."""
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


def call_deep(frames: int, call: Any) -> Any:
    return call() if frames == 0 else call_deep(frames - 1, call)


@given(value=JSON)
@fuzz_settings(200)
def test_the_depth_scan_is_exact_and_values_round_trip(value: Any) -> None:
    text = json.dumps(value)
    assert safe_json.nesting_depth(text, 64) == depth_of(value)
    assert safe_json.loads(text, what="v", error=RecordError) == value
    assert safe_json.loads(text.encode(), what="v", error=RecordError) == value


@pytest.mark.parametrize("text", ["[" * 980 + "]" * 980, '{"a": ' * 980 + "1" + "}" * 980, "[" * 100_000,
                                  '{"k": [' + "{" * 65])
def test_deep_text_is_the_callers_error_from_150_frames_down(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(RecordError, match=r"^the record: expected at most max_depth=64 levels of nesting, "
                                          r"received \d+; hint: "):
        call_deep(150, lambda: safe_json.loads(text, what="the record", error=RecordError))
    assert time.perf_counter() - start < 0.5


def test_980_levels_parse_when_allowed_even_from_150_frames_down() -> None:
    """The limit, not the caller's stack, decides: a generous max_depth still ends in a value or the typed error."""
    text = "[" * 980 + "]" * 980
    try:
        value = call_deep(150, lambda: safe_json.loads(text, what="r", error=RecordError, max_depth=1000))
        assert safe_json.nesting_depth(json.dumps(value), 2000) == 980
    except RecordError as exc:  # the parser's own recursion limit, reached: typed, not a RecursionError
        assert "RecursionError" in str(exc)


def test_brackets_in_strings_and_escapes_do_not_count() -> None:
    text = json.dumps({"a": "[[[[{{{{" * 50 + '\\"]]', "b": ["\\", "\"[", "\n{"]})
    assert safe_json.nesting_depth(text, 3) == 2
    assert safe_json.loads(text, what="r", error=RecordError, max_depth=2)["b"] == ["\\", "\"[", "\n{"]


FAILURES = {
    "truncated": ('{"a": [1, 2', r"expected complete JSON text, received Expecting ',' delimiter at line 1 column 12"),
    "empty": ("", r"expected complete JSON text, received Expecting value"),
    "5000 digits": ("1" * 5000, r"JSON numbers of at most 4,300 digits, received ValueError"),
    "not UTF-8": (b"\xff[1]", r"expected UTF-8 JSON text, received a byte 0xff that is not UTF-8 at offset 0"),
    "not text": (["a list"], r"expected JSON text \(str or bytes\), received list"),
    "too long": ("[" + "0," * 60 + "0]" + " " * 9000, r"expected at most max_chars=9000 characters, received 9123"),
}


@pytest.mark.parametrize("case", FAILURES, ids=list(FAILURES))
def test_every_failure_is_the_callers_error_saying_expected_and_received(case: str) -> None:
    text, message = FAILURES[case]
    with pytest.raises(RecordError, match=message) as info:
        safe_json.loads(text, what="the record", error=RecordError, max_chars=9000)
    assert str(info.value).startswith("the record: expected") and "; hint: " in str(info.value)


def test_a_byte_order_mark_is_skipped_and_hooks_errors_pass_unchanged() -> None:
    assert safe_json.loads(b"\xef\xbb\xbf[1]", what="r", error=RecordError) == [1]

    def refuse(pairs: list) -> dict:
        raise RecordError("refused by the hook")

    with pytest.raises(RecordError, match="^refused by the hook$"):
        safe_json.loads('{"a": 1}', what="r", error=RecordError, object_pairs_hook=refuse)


# -- the readers that use it ---------------------------------------------------------------------------------------
def test_graph_documents_use_it() -> None:
    import ngraph_core as ng

    with pytest.raises(SerializationError, match="graph document: expected at most max_depth=64"):
        call_deep(150, lambda: ng.deserialize("[" * 980 + "]" * 980))


def test_a_deep_conv_choice_record_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "conv_choices.json"
    record.write_text('{"k": ' + "[" * 980 + "]" * 980 + "}")
    monkeypatch.setattr(conv_choice, "choices_path", lambda: record)
    monkeypatch.setattr(conv_choice, "_loaded", False)
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    call_deep(150, conv_choice._load_choices)  # re-measured later, never a RecursionError
    assert conv_choice.MEASURED == {}


def test_allgather_object_decodes_with_it() -> None:
    comm = LocalCommunicator()
    assert comm.allgather_object({"loss": [1.5, [2]]}) == [{"loss": [1.5, [2]]}]
    deep: Any = 0
    for _ in range(200):
        deep = [deep]
    with pytest.raises(DistributedError, match=r"allgather_object on rank 0: the object from rank 0: expected at "
                                               r"most max_depth=128 levels of nesting, received 200"):
        comm.allgather_object(deep)
