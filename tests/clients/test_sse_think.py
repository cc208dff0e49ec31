"""SSE framing and think-tag splitting: the pure text layers under every streamed reply."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_rt.errors import StreamError
from forge_rt.wire import SSEDecoder, SSEEvent, ThinkSplitter, encode_sse, split_think


def _events(lines: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out = [e for line in lines if (e := decoder.feed_line(line)) is not None]
    if (last := decoder.close()) is not None:
        out.append(last)
    return out


def test_sse_joins_data_lines_and_dispatches_on_blank_line() -> None:
    """Multi-line data is joined with newlines; the event name travels with it."""
    lines = ["event: delta", "data: a", "data: b", "", ": keep-alive comment", "data:c", ""]
    assert [SSEEvent("a\nb", "delta"), SSEEvent("c")] == _events(lines)


def test_sse_dispatches_an_event_cut_off_before_its_blank_line_at_close() -> None:
    """A final data line without the blank line after it still counts at end of body."""
    assert [SSEEvent("[DONE]")] == _events(["data: [DONE]"])


def test_sse_rejects_a_line_that_is_not_a_field() -> None:
    """Garbage inside an event stream is a framing error, not something to skip."""
    decoder = SSEDecoder()
    with pytest.raises(StreamError, match=r"not an SSE field: 'garbage here'"):
        decoder.feed_line("garbage here")


def test_sse_turns_a_bare_error_line_into_an_error_event() -> None:
    """llama-server's ``error: {...}`` line is dispatched at once as an ``error`` event."""
    assert SSEEvent('{"code":500}', "error") == SSEDecoder().feed_line('error: {"code":500}')


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r")))
def test_sse_encode_then_decode_round_trips(text: str) -> None:
    """Whatever ``encode_sse`` writes, the decoder reads back unchanged (newlines included)."""
    lines = encode_sse(text, event="x").decode().split("\n")
    assert [SSEEvent(text, "x")] == _events(lines)


def test_split_think_separates_reasoning_and_strips_the_gap_after_it() -> None:
    """A leading think block becomes reasoning; the blank line after it is dropped."""
    assert split_think("<think>\nplan it\n</think>\n\nAnswer.") == ("Answer.", "plan it")


def test_split_think_leaves_text_without_tags_untouched() -> None:
    """No tags: the text is returned exactly, reasoning is None."""
    assert split_think("  hello\n") == ("  hello\n", None)


def test_split_think_keeps_an_unclosed_block_as_reasoning() -> None:
    """A reply cut off inside its think block has no visible text yet."""
    assert split_think("<think>still thinking") == ("", "still thinking")


@pytest.mark.parametrize(
    "pieces",
    [
        ["<think>ab</think>cd"],
        ["<thi", "nk>ab</th", "ink>", "cd"],
        ["<", "t", "h", "i", "n", "k", ">", "a", "b", "<", "/think>", "c", "d"],
    ],
    ids=["whole", "tags-split", "char-by-char"],
)
def test_think_splitter_gives_the_same_result_however_the_deltas_are_cut(
    pieces: list[str],
) -> None:
    """Tags split across deltas are recognised; the parts add up to the whole-text split."""
    splitter = ThinkSplitter()
    parts = [p for piece in pieces for p in splitter.feed(piece)] + splitter.flush()
    text = "".join(p for kind, p in parts if kind == "text")
    reasoning = "".join(p for kind, p in parts if kind == "reasoning")
    assert (text, reasoning) == ("cd", "ab")


@given(st.lists(st.text(alphabet="<>/thinkab \n"), max_size=8))
def test_think_splitter_streamed_equals_whole(pieces: list[str]) -> None:
    """Feeding any cut of a text yields the same text and reasoning as feeding it whole."""
    whole = ThinkSplitter()
    expected = whole.feed("".join(pieces)) + whole.flush()
    streamed = ThinkSplitter()
    got = [p for piece in pieces for p in streamed.feed(piece)] + streamed.flush()

    def join(parts: list[tuple[str, str]], kind: str) -> str:
        return "".join(p for k, p in parts if k == kind)

    assert (join(expected, "text"), join(expected, "reasoning")) == (
        join(got, "text"),
        join(got, "reasoning"),
    )
