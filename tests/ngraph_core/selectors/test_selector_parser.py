"""The selector parser: canonical text of valid queries, the AST's shape, errors at the right column,
and fuzz tests (any text parses, or fails with a SelectorError, and then evaluates without crashing;
long and deep queries, up to and past ``MAX_QUERY_LENGTH``, end as fast on a few-hundred-op graph)."""

from __future__ import annotations

import time

import pytest
from fuzzing import HANG_SECONDS, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from selector_net import build_net
from test_selector_limits import training_graph

import ngraph_core as ng
from ngraph_core.selectors import AttrTest, Complex, Compound, LabelTest, NameTest, Pseudo, SelectorList, parse
from ngraph_core.selectors.parser import MAX_QUERY_LENGTH

CANONICAL = [
    ("Conv", "Conv"),
    ("variable", "variable"),
    ("*", "*"),
    ("#conv1", "#conv1"),
    ("#0", "#0"),
    (".bias", ".bias"),
    ("Conv>Pool  variable", "Conv > Pool variable"),
    (" Conv >Pool\tvariable ", "Conv > Pool variable"),
    ("A >> B<<C < D", "A >> B << C < D"),
    ("  .elementwise:not( Conv * )", ".elementwise:not(Conv *)"),
    ("[nout=64]", "[nout=64]"),
    ("[ name ^= 'conv' ]", "[name^=conv]"),
    ("[name='a b']", '[name="a b"]'),
    ("[name=\"say \\\"hi\\\"\"]", '[name="say \\"hi\\""]'),
    ("[lr!=1.5e-3]", "[lr!=1.5e-3]"),
    ("[path$=model/conv1]", "[path$=model/conv1]"),
    ("[w*=-2]", "[w*=-2]"),
    ("[flag]", "[flag]"),
    ("Conv,Pool , Affine", "Conv, Pool, Affine"),
    (":has(variable.trainable)", ":has(variable.trainable)"),
    ("Affine[nout=10]#fc.x:not(.y, .z)", "Affine[nout=10]#fc.x:not(.y, .z)"),
    ('#"conv 1"', '#"conv 1"'),
    ("dot:has(Conv > Pool)", "dot:has(Conv > Pool)"),
    ("conv_bprop_data", "conv_bprop_data"),
    ("Conv *", "Conv *"),
    ("Conv.w", "Conv.w"),
    ("#a-b_c", "#a-b_c"),
    ("Ünïcode #naïve", "Ünïcode #naïve"),
]


@pytest.mark.parametrize("query, canonical", CANONICAL)
def test_valid_queries_print_canonically_and_reparse_to_the_same_tree(query: str, canonical: str) -> None:
    tree = parse(query)
    assert str(tree) == canonical
    assert parse(canonical) == tree


def test_the_ast_has_the_expected_shape() -> None:
    assert parse("Conv > Pool variable") == SelectorList((Complex(
        Compound("Conv"), ((">", Compound("Pool")), (" ", Compound("variable")))),))
    assert parse(".elementwise:not(Conv *), #W[dtype!=float32]") == SelectorList((
        Complex(Compound(None, (LabelTest("elementwise"), Pseudo("not", SelectorList((
            Complex(Compound("Conv"), ((" ", Compound("*")),)),)))))),
        Complex(Compound(None, (NameTest("W"), AttrTest("dtype", "!=", "float32")))),
    ))
    tree = parse("Layer[nout]")
    assert tree.selectors[0].first.matches_scopes and not tree.selectors[0].first.matches_ops
    assert parse("dot").selectors[0].first.matches_ops and not parse("dot").selectors[0].first.matches_scopes
    untyped = parse("#conv1").selectors[0].first
    assert untyped.matches_ops and untyped.matches_scopes


ERRORS = [
    ("", 1, "expected a selector at column 1, found end of query"),
    ("   ", 4, "expected a selector at column 4"),
    ("Conv >", 7, "expected a selector after '>' at column 7"),
    ("Conv > > Pool", 8, "after '>' at column 8, found '>'"),
    ("Conv >>> Pool", 8, "after '>>' at column 8"),
    ("Conv,", 6, "after ','"),
    ("Conv, ,Pool", 7, "after ','"),
    (":not(Conv", 10, "expected ')' to close ':not(' from column 1 at column 10"),
    (":not(Conv))", 11, "expected a combinator"),
    (":not()", 6, "a selector after ':not('"),
    ("[nout=64", 9, "expected ']'"),
    ("[nout~=64]", 6, "or an operator"),
    ("[=3]", 2, "an attribute name after '['"),
    ("[nout=]", 7, "a value after '='"),
    (":foo(x)", 2, "expected a pseudo-class (:not or :has) at column 2, found 'foo'"),
    (":", 2, "found end of query"),
    ("#", 2, "expected a name after '#' at column 2"),
    ("Conv #", 7, "a name after '#'"),
    (".", 2, "a label or op group after '.'"),
    ("convv", 1, "expected an op kind"),
    ("Conv > 3x", 8, "a layer type (Capitalized) or an op kind (lowercase)"),
    ('#"abc', 2, "a closing \""),
    ("Conv)", 5, "found ')'"),
    ("Conv ^ Pool", 6, "found '^'"),
    ("a", 1, "found 'a'"),
    (":not(:has(variable)", 20, "to close ':not('"),
]


@pytest.mark.parametrize("query, column, fragment", ERRORS)
def test_malformed_queries_raise_selector_errors_at_the_column(query: str, column: int, fragment: str) -> None:
    with pytest.raises(ng.SelectorError) as info:
        parse(query)
    assert info.value.column == column
    assert info.value.query == query
    assert fragment in str(info.value)
    assert "hint:" in str(info.value)


def test_the_message_shows_a_caret_under_the_column() -> None:
    with pytest.raises(ng.SelectorError) as info:
        parse("Conv >")
    assert "\n  Conv >\n        ^\n" in str(info.value)


def test_unknown_op_kinds_list_close_matches() -> None:
    with pytest.raises(ng.SelectorError, match="did you mean conv"):
        parse("Pool > convv")


def test_nesting_is_bounded_and_non_strings_are_refused() -> None:
    with pytest.raises(ng.SelectorError, match="nested"):
        parse(":not(" * 40 + "dot" + ")" * 40)
    assert str(parse(":not(" * 5 + "dot" + ")" * 5)) == ":not(" * 5 + "dot" + ")" * 5
    with pytest.raises(ng.SelectorError, match="expected a query string"):
        parse(42)  # type: ignore[arg-type]


ALPHABET = st.sampled_from(list("CPvVad*#.[]():,>< =!^$*'\"\\-_0/\t") + [
    "Conv", "Pool", "variable", "dot", "not", "has", ":not(", ":has(", "[nout=", "elementwise", "é", "\x00"])
_NET = build_net()


@pytest.mark.fuzz
@fuzz_settings(200)
@given(st.lists(ALPHABET, max_size=24).map("".join) | st.text(max_size=30))
def test_fuzz_any_text_parses_or_raises_selector_error(query: str) -> None:
    try:
        tree = parse(query)
    except ng.SelectorError as exc:
        assert 1 <= exc.column <= len(query) + 1 and "expected" in str(exc)
        return
    assert parse(str(tree)) == tree  # the canonical text means the same
    selection = ng.select(_NET.out, query, unknown_types="ignore")  # random types name nothing: no warning
    assert len(selection.names) == len(selection)


_BIG = training_graph()  # 525 ops in 25 scopes
ATOM = st.sampled_from(["*", "Affine", "Layer", "variable", "dot", "add", "#W", "#b", ".weight", "[name^=W]",
                        "[kind!=dot]", "*:not(#b)", "Affine:has(dot)"])
COMBINATOR = st.sampled_from([" ", ">", ">>", "<", "<<", " > ", ","])
PIECE = ATOM | COMBINATOR | st.sampled_from([":not(", ":has(", ")", "(", "'", ""])


@st.composite
def long_queries(draw: st.DrawFn) -> str:
    """A pattern repeated up to past ``MAX_QUERY_LENGTH``, inside up to 40 nested pseudo-classes: valid
    (atoms joined by combinators) half the time, any pieces the other half."""
    if draw(st.booleans()):
        atoms = draw(st.lists(ATOM, min_size=1, max_size=6))
        pattern = "".join(a + draw(COMBINATOR) for a in atoms[:-1]) + atoms[-1]
        sep = draw(COMBINATOR)
    else:
        pattern, sep = "".join(draw(st.lists(PIECE, min_size=1, max_size=12))), draw(PIECE)
    repeat = draw(st.integers(1, 2 * MAX_QUERY_LENGTH // max(len(pattern + sep), 1) + 1))
    depth = draw(st.integers(0, 40))
    pseudo = draw(st.sampled_from([":not(", ":has(", "*:not(", "Affine:has("]))
    return pseudo * depth + sep.join([pattern] * repeat) + ")" * depth


@pytest.mark.fuzz
@fuzz_settings(30)
@given(long_queries())
def test_fuzz_long_and_deep_queries_end_fast(query: str) -> None:
    start = time.perf_counter()
    try:
        ng.select(_BIG, query)
    except ng.SelectorError as exc:
        assert 1 <= exc.column <= len(query) + 1 and "expected" in str(exc) and "hint:" in str(exc)
        assert len(query) <= MAX_QUERY_LENGTH or exc.column == MAX_QUERY_LENGTH + 1
    else:
        assert len(query) <= MAX_QUERY_LENGTH
    elapsed = time.perf_counter() - start
    assert elapsed < HANG_SECONDS, f"{elapsed:.1f} s on {query[:200]!r}"
