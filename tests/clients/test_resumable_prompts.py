"""ResumablePrompts: which prompt parts resume a cut reply from its own tokens."""

from __future__ import annotations

import pytest

from forge_rt.clients._resumable import ResumablePrompts
from forge_rt.wire import CompletionPiece

PROMPT = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def _streamed(prompts: ResumablePrompts, text: str, *pieces: tuple[str, tuple[int, ...]]) -> None:
    parts = prompts.prompt(text)
    prompts.streaming(parts[0] if len(parts) == 1 else parts, [CompletionPiece(*p) for p in pieces])


def test_a_new_prompt_is_sent_as_its_text() -> None:
    assert ResumablePrompts().prompt(PROMPT) == [PROMPT]


def test_a_preempted_twice_reply_resumes_from_both_attempts_tokens() -> None:
    """The second continuation spells the prompt, the first attempt's tokens and the second's."""
    prompts = ResumablePrompts()
    _streamed(prompts, PROMPT, ("{", (90,)), ('"name"', (1, 2)))
    _streamed(prompts, PROMPT + '{"name"', (":", (25,)), (' "x"', (330, 87)))
    assert prompts.prompt(PROMPT + '{"name": "x"') == [PROMPT, 90, 1, 2, 25, 330, 87]


def test_text_beyond_the_streamed_pieces_follows_the_tokens_as_text() -> None:
    """A prefill that goes past what was streamed (or differs from it) keeps the tokens of the
    pieces it matches, and the rest is text; a piece with no text waits for the next one."""
    prompts = ResumablePrompts()
    _streamed(prompts, PROMPT, ("", (240,)), ("é", (159,)), ("ab", (7,)))
    assert prompts.prompt(PROMPT + "éaX") == [PROMPT, 240, 159, "aX"]


def test_a_prompt_that_only_extends_a_remembered_one_stays_one_text() -> None:
    """No token matched: the texts join, since a prompt array of texts alone is several prompts."""
    prompts = ResumablePrompts()
    _streamed(prompts, PROMPT, ("A", (1,)))
    assert prompts.prompt(PROMPT + "B") == [PROMPT + "B"]


def test_only_the_last_keep_generations_are_remembered() -> None:
    prompts = ResumablePrompts(keep=2)
    for n in range(3):
        _streamed(prompts, f"{PROMPT}{n}", ("A", (1,)))
    assert len(prompts) == 2
    assert prompts.prompt(f"{PROMPT}0A") == [f"{PROMPT}0A"]  # forgotten: sent as text
    assert prompts.prompt(f"{PROMPT}2A") == [f"{PROMPT}2", 1]


def test_keep_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keep must be at least 1"):
        ResumablePrompts(keep=0)
