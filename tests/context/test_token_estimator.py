"""TokenEstimator: the heuristic's arithmetic, message structure, caching, calibration, usage."""

from __future__ import annotations

import math

import pytest
from ctx_histories import call, histories
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_rt.context import CALIBRATION_TEXTS, DEFAULT_RATIO, TokenEstimator
from forge_rt.context._estimate import DIGIT_WEIGHT, MIN_RATIO_DELTA_UNITS, PUNCT_WEIGHT
from forge_rt.core import Message, MessageType, Role


def unit_estimator(**kw: float) -> TokenEstimator:
    """An estimator where one plain character is one token, for exact arithmetic."""
    return TokenEstimator(ratio=1.0, **kw)  # type: ignore[arg-type]


def test_empty_text_is_zero_tokens() -> None:
    """Nothing costs nothing."""
    assert TokenEstimator().count("") == 0


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("abc", 3),
        ("123", 3 * DIGIT_WEIGHT),
        ('{"a":1}', 1 + 1 * DIGIT_WEIGHT + 5 * PUNCT_WEIGHT),
        ("é", 2),  # two UTF-8 bytes
        ("東京", 6),
    ],
    ids=["letters", "digits", "json", "accent", "cjk"],
)
def test_count_weighs_characters(text: str, units: float) -> None:
    """Letters cost a byte each, digits and JSON punctuation more, tokens = ceil(units / ratio)."""
    assert unit_estimator().count(text) == math.ceil(units)
    assert TokenEstimator().count(text) == math.ceil(units / DEFAULT_RATIO)


def test_default_ratio_is_about_four_and_a_half_chars_per_token_of_prose() -> None:
    """871 characters of plain English come to 190 tokens with the default ratio."""
    prose = "the model reads the tool result and decides what to call next " * 14 + "end"
    assert TokenEstimator().count(prose) == math.ceil(len(prose) / DEFAULT_RATIO) == 190


def test_message_structure_is_counted() -> None:
    """A message costs its template structure; a tool result adds its wrapper."""
    estimator = unit_estimator(message_tokens=5, call_tokens=11, tool_result_tokens=9)
    c = call("get_weather", "c1", city="Paris")
    assert estimator.count_message(Message.user("")) == 5
    assert estimator.count_message(Message.user("hello")) == 10
    assert estimator.count_message(Message.tool_result(c, "")) == 14


def test_tool_call_names_and_json_arguments_are_counted() -> None:
    """An assistant call costs the call structure, the tool's name and its JSON-encoded args."""
    estimator = unit_estimator(message_tokens=0, call_tokens=0, tool_result_tokens=0)
    one = Message.assistant_calls([call("get_weather", "c1", city="Paris")])
    # {"city":"Paris"} is 16 bytes: 4 quotes, 2 braces and 1 colon (7 punctuation), 9 letters.
    args_units = 9 + 7 * PUNCT_WEIGHT
    assert estimator.count_message(one) == math.ceil(len("get_weather") + args_units)
    two = Message.assistant_calls(
        [call("get_weather", "c1", city="Paris"), call("get_weather", "c2", city="Paris")]
    )
    structured = unit_estimator(message_tokens=0, call_tokens=11, tool_result_tokens=0)
    assert structured.count_message(two) == 22 + math.ceil(2 * (len("get_weather") + args_units))


def test_token_estimate_field_is_taken_at_its_word() -> None:
    """A message carrying token_estimate counts as that number."""
    message = Message(
        role=Role.USER, content="x" * 1000, type=MessageType.USER_INPUT, token_estimate=7
    )
    assert TokenEstimator().count_message(message) == 7
    assert TokenEstimator().count_messages([message, message]) == 14


def test_count_messages_is_the_sum_of_count_message() -> None:
    """The history total equals the per-message estimates summed, and count_each lists them."""
    estimator = TokenEstimator()
    history = [
        Message.system("be brief"),
        Message.user("what is 2+2?"),
        Message.assistant_text("4"),
    ]
    each = [estimator.count_message(m) for m in history]
    assert estimator.count_each(history) == each
    assert estimator.count_messages(history) == sum(each)


@settings(max_examples=60, deadline=None)
@given(histories(), st.integers(0, 3))
def test_cache_never_returns_a_stale_estimate(history: list[Message], cache_size: int) -> None:
    """A caching estimator agrees with an uncached one, also across re-created messages and a
    tiny cache that evicts constantly."""
    cached = TokenEstimator(cache_size=cache_size or 32_768)
    plain = TokenEstimator(cache_size=0)
    assert cached.count_each(history) == plain.count_each(history)
    # Each original is dropped as soon as its copy exists, so the next copy can take its id
    # (CPython reuses a freed object's memory at once); only the cache can keep an original alive.
    pending = history[::-1]
    del history[:]
    copies = []
    while pending:
        original = pending.pop()
        copies.append(original.with_content(original.content + "!"))
    assert cached.count_each(copies) == plain.count_each(copies)
    assert cached.count_each(copies) == plain.count_each(copies)


def test_calibrate_fits_total_units_over_total_tokens() -> None:
    """Calibration sets ratio to total units over total tokens, replacing the old ratio."""
    estimator = TokenEstimator()
    ratio = estimator.calibrate([("a" * 300, 100), ("b" * 100, 0)])
    assert ratio == estimator.ratio == 4.0
    assert estimator.count("c" * 40) == 10


def test_calibrate_needs_tokens() -> None:
    """Calibrating with nothing to fit is refused with a message saying what is missing."""
    with pytest.raises(ValueError, match=r"^calibrate needs at least one non-empty text"):
        TokenEstimator().calibrate([])
    with pytest.raises(ValueError, match=r"^calibrate: a token count must be >= 0, got -1"):
        TokenEstimator().calibrate([("abc", -1)])


def test_calibration_texts_cover_prose_json_code_and_non_ascii() -> None:
    """The built-in calibration samples include digits, JSON punctuation and non-ASCII text."""
    joined = "".join(CALIBRATION_TEXTS)
    assert any(ch.isdigit() for ch in joined)
    assert '{"' in joined
    assert not joined.isascii()


def truth(messages: list[Message], outside: int, ratio: float) -> int:
    """A stand-in backend: fixed outside part + 5 per message + text at a ratio of its own."""
    reference = TokenEstimator(ratio=ratio, call_tokens=0, tool_result_tokens=0)
    return outside + reference.count_messages(messages)


def growing_session(turns: int) -> list[list[Message]]:
    """Snapshots of a history that grows by a call and a 600-character result per turn."""
    history = [Message.system("You answer weather questions."), Message.user("Paris?")]
    snapshots = []
    for turn in range(turns):
        c = call("get_weather", f"c{turn}", city="Paris")
        history = [*history, Message.assistant_calls([c]), Message.tool_result(c, "w" * 600)]
        snapshots.append(history)
    return snapshots


def test_observe_usage_learns_the_fixed_part_from_one_reply() -> None:
    """After one observation the prompt estimate matches what the backend reported."""
    estimator = TokenEstimator(call_tokens=0, tool_result_tokens=0)
    first = growing_session(1)[0]
    reported = truth(first, outside=700, ratio=DEFAULT_RATIO)
    estimator.observe_usage(first, reported)
    assert estimator.offset_tokens == 700
    assert estimator.count_prompt(first) == reported
    assert estimator.ratio == DEFAULT_RATIO  # one observation says nothing about the ratio


def test_observe_usage_converges_on_another_tokenizer() -> None:
    """Against a backend with a different ratio and 900 tokens of tool schemas, the prompt
    estimate ends within 1% of the truth and the ratio near the backend's."""
    estimator = TokenEstimator(call_tokens=0, tool_result_tokens=0)
    for snapshot in growing_session(20):
        estimator.observe_usage(snapshot, truth(snapshot, outside=900, ratio=3.0))
    final = growing_session(21)[-1]
    real = truth(final, outside=900, ratio=3.0)
    assert abs(estimator.count_prompt(final) - real) <= real * 0.01
    assert abs(estimator.ratio - 3.0) < 0.05


def test_observe_usage_moves_the_ratio_by_alpha() -> None:
    """The ratio moves a usage_alpha share of the way to the ratio of the change."""
    estimator = unit_estimator(message_tokens=0, usage_alpha=0.5)
    small = [Message.user("a" * 100)]
    large = [Message.user("a" * 100), Message.user("b" * 600)]
    estimator.observe_usage(small, 150)
    ratio = estimator.observe_usage(large, 150 + 300)  # 600 more units for 300 more tokens: 2.0
    assert ratio == estimator.ratio == 1.5


def test_observe_usage_ignores_small_changes_for_the_ratio() -> None:
    """A change of less than MIN_RATIO_DELTA_UNITS updates only the offset."""
    estimator = unit_estimator(message_tokens=0)
    estimator.observe_usage([Message.user("a" * 100)], 150)
    grown = [Message.user("a" * 100), Message.user("b" * int(MIN_RATIO_DELTA_UNITS - 1))]
    assert estimator.observe_usage(grown, 1000) == 1.0


def test_observe_usage_rejects_a_non_positive_report() -> None:
    """A prompt of zero tokens is not an observation."""
    with pytest.raises(
        ValueError, match=r"^observe_usage: reported_prompt_tokens must be positive, got 0$"
    ):
        TokenEstimator().observe_usage([Message.user("hi")], 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ratio": 0.0}, r"^TokenEstimator ratio must be a positive number, got 0.0$"),
        ({"ratio": math.inf}, r"^TokenEstimator ratio must be a positive number, got inf$"),
        ({"usage_alpha": 0.0}, r"^TokenEstimator usage_alpha must be in \(0, 1\], got 0.0$"),
        (
            {"call_tokens": -1},
            r"^TokenEstimator message_tokens, call_tokens and tool_result_tokens",
        ),
        ({"cache_size": -1}, r"^TokenEstimator cache_size must be >= 0, got -1$"),
    ],
    ids=["zero-ratio", "infinite-ratio", "zero-alpha", "negative-structure", "negative-cache"],
)
def test_settings_are_validated(kwargs: dict[str, float], message: str) -> None:
    """Nonsense settings are refused at construction with the field named."""
    with pytest.raises(ValueError, match=message):
        TokenEstimator(**kwargs)  # type: ignore[arg-type]
