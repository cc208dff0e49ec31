"""The repetition detector: a reply that repeats one call or one line is found as it streams."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from forge_rt.core import ResetChunk, StreamChunk, TextDeltaChunk, ToolCallDeltaChunk
from forge_rt.guardrails import (
    CALL_REPEATS,
    LINE_REPEATS,
    SPACE_RUN,
    Repetition,
    RepetitionDetector,
)
from forge_rt.guardrails._repetition import before_the_loop

CHECK = (
    '{"name": "check_interactions", "arguments": {"patient_id": "john_doe", "medication": "%s"}}'
)

# Reply 67 of qwen25coder_raw_outputs.jsonl (0.5B): two calls alternating until the token cap
# (34 calls in 3,506 characters); the first ten lines, verbatim.
REAL_LOOP = "\n".join(CHECK % m for m in ["ciprofenamide", "ibuprofen"] * 5)

# Reply 12 (0.5B): a chain written ahead whose terminal call is duplicated: a slip, not a loop.
REAL_SLIP = (
    '{"name": "fetch_rainfall_data", "arguments": {"quarter": 4, "year": 2031}}\n'
    '{"name": "analyze_rainfall", "arguments": {}}\n'
    '{"name": "report", "arguments": {"findings": "The sales data for Q4 2031 quarter and year '
    'have been successfully loaded and analyzed."}}\n'
    '{"name": "report", "arguments": {"findings": "The sales data for Q4 2031 quarter and year '
    'have been successfully loaded and analyzed."}}'
)


def stream(detector: RepetitionDetector, text: str, size: int = 3) -> tuple[Repetition | None, int]:
    """Feed ``text`` in ``size``-character deltas; what was found and how much had been fed."""
    for start in range(0, len(text), size):
        found = detector.feed(TextDeltaChunk(text[start : start + size]))
        if found is not None:
            return found, min(start + size, len(text))
    return None, len(text)


def test_the_same_call_written_again_and_again_is_found_at_its_third_copy() -> None:
    """Thirty copies of one call are found as soon as the third one closes."""
    line = CHECK % "ibuprofen"
    found, fed = stream(RepetitionDetector(), "\n".join([line] * 30), size=1)
    assert found == Repetition(
        kind="call",
        text=json.dumps(json.loads(line), sort_keys=True, separators=(",", ":")),
        count=CALL_REPEATS,
    )
    assert fed == 3 * len(line) + 2  # the third copy and the two newlines before it


def test_a_cycle_of_calls_is_found_when_one_of_them_comes_round_the_third_time() -> None:
    """The real 0.5B's alternation of two calls is found at the fifth call, not at the cap."""
    found, fed = stream(RepetitionDetector(), REAL_LOOP)
    assert found is not None
    assert (found.kind, found.count, "ciprofenamide" in found.text) == ("call", 3, True)
    assert REAL_LOOP[:fed].count('"name"') == 5


def test_a_call_written_twice_is_a_slip_not_a_loop() -> None:
    """A reply that duplicates its last call is left to the validator, which collapses it."""
    assert stream(RepetitionDetector(), REAL_SLIP) == (None, len(REAL_SLIP))


def test_the_same_call_however_spaced_or_ordered_is_one_call() -> None:
    """Key order and whitespace do not make a repeated call new."""
    copies = [
        '{"name": "ping", "arguments": {"a": 1, "b": 2}}',
        '{"arguments": {"b": 2, "a": 1}, "name": "ping"}',
        '{\n  "name": "ping",\n  "arguments": {\n    "a": 1,\n    "b": 2\n  }\n}',
    ]
    found, _ = stream(RepetitionDetector(), "\n".join(copies))
    assert found is not None
    assert found.text == '{"arguments":{"a":1,"b":2},"name":"ping"}'


@pytest.mark.parametrize(
    "wrap",
    [
        lambda call: f"```json\n{call}\n```\n",
        lambda call: f"<tool_call>\n{call}\n</tool_call>\n",
        lambda call: f"I will check it: {call}. ",
        lambda call: "{" + call + "}\n",  # doubled braces: not JSON, still the same text
    ],
    ids=["fenced", "hermes", "in-prose", "doubled-braces"],
)
def test_calls_are_counted_in_every_text_dialect(wrap: Callable[[str], str]) -> None:
    """A call repeated inside fences, tags, prose or doubled braces is found all the same."""
    text = "".join(wrap(CHECK % "aspirin") for _ in range(3))
    found, _ = stream(RepetitionDetector(), text)
    assert found is not None
    assert found.kind == "call"


def test_calls_repeated_inside_one_array_are_counted() -> None:
    """The items of an array of calls are calls: three alike in one array are a loop."""
    text = "[" + ", ".join([CHECK % "aspirin"] * 3) + "]"
    found, _ = stream(RepetitionDetector(), text)
    assert found is not None
    assert found.count == 3


def test_objects_that_name_no_tool_are_not_calls() -> None:
    """Repeated data objects (a list of rows) are not calls; only call-shaped objects count."""
    text = "\n".join(['{"city": "Quito", "temp": 18}'] * 5)
    assert stream(RepetitionDetector(), text) == (None, len(text))


def test_unbalanced_quotes_in_prose_do_not_hide_calls() -> None:
    """A stray quote in prose before the calls does not shift the scan into a string."""
    text = 'He said "hello.\n' + "\n".join([CHECK % "aspirin"] * 3)
    found, _ = stream(RepetitionDetector(), text)
    assert found is not None


def test_a_line_repeated_eight_times_is_found() -> None:
    """An echoed list that repeats a line is found at the eighth copy of the line."""
    row = '      {"type": "viewer", "description": "Alice can view content from the server"},'
    found, fed = stream(RepetitionDetector(), "\n".join([row] * 20) + "\n")
    assert found == Repetition(kind="line", text=row.strip(), count=LINE_REPEATS)
    assert fed < 9 * len(row)


def test_lines_inside_a_json_string_are_counted() -> None:
    """The real 0.5B looped inside a respond message (escaped line breaks, two lines taking
    turns) for 2,048 tokens: found at the eighth copy of a line, not at the cap."""
    lines = ["B-4 total: 40 EUR", "B-5 total: 65 EUR"]
    lines += ["Total of one order: 40 EUR", "Total of one order: 65 EUR"] * 40
    message = json.dumps({"name": "respond", "arguments": {"message": "\n".join(lines)}})
    assert "\n" not in message  # the breaks are escaped, as a model writes them in JSON
    found, fed = stream(RepetitionDetector(), message)
    assert found is not None
    assert (found.kind, found.count) == ("line", 4)  # 4 blocks of 2
    assert set(found.text.split(" / ")) == {lines[2], lines[3]}
    assert fed < len(message) / 4


def test_sentences_looping_inside_one_paragraph_are_found() -> None:
    """A respond message that loops inside one paragraph -- no line break for the line count
    to see -- is found at the fourth copy of a block of two sentences, not at the token cap."""
    loop = "The quay was rebuilt in 1911 by the Marten yard. The yard closed the same winter. "
    message = json.dumps(
        {"name": "respond", "arguments": {"message": "Nobody logged the tides. " + loop * 60}}
    )
    found, fed = stream(RepetitionDetector(), message)
    assert found is not None
    assert (found.kind, found.count) == ("sentence", 4)
    assert found.text == (
        "The quay was rebuilt in 1911 by the Marten yard. / The yard closed the same winter."
    )
    assert fed < 6 * len(loop)
    assert found.reason.startswith("the reply wrote the same sentence 4 times")


def test_a_sentence_that_recurs_between_others_is_no_loop() -> None:
    """Prose that says "Status: open." of each of twelve tickets repeats a sentence, but never
    back to back: an answer, not a loop."""
    answer = " ".join(f"Ticket T-{i} was filed by desk {i % 5}. Status: open." for i in range(12))
    assert stream(RepetitionDetector(), answer) == (None, len(answer))


def test_a_line_that_heads_each_record_of_a_value_is_no_loop() -> None:
    """Ten records in one report, each with "Quarter: Q4": data, not a loop."""
    records = [f"Quarter: Q4\nYear: {2015 + i}\nSales: ${15 + i},000" for i in range(10)]
    call = json.dumps({"name": "report", "arguments": {"findings": "\n\n".join(records)}})
    assert call.count("Quarter: Q4\\n") == 10  # the records' line breaks, escaped in JSON
    assert stream(RepetitionDetector(), call) == (None, len(call))


def test_an_escaped_backslash_before_n_is_no_line_break() -> None:
    """A Windows path ("C:\\new\\notes.txt") written in three different calls: read as
    line breaks, its pieces would repeat; they are not."""
    calls = "\n".join(
        json.dumps({"name": tool, "arguments": {"path": "C:\\new\\notes.txt"}})
        for tool in ("read", "stat", "open")
    )
    assert stream(RepetitionDetector(line_repeats=3), calls) == (None, len(calls))


def test_a_line_repeated_seven_times_is_not_degenerate() -> None:
    """Seven calls written one argument per line share that line without tripping the stop."""
    calls = "".join(
        f'```json\n{{\n  "name": "lookup_{i}",\n  "arguments": {{\n    "employee_id": "E-1847"\n'
        "  }\n}\n```\n"
        for i in range(7)
    )
    assert stream(RepetitionDetector(), calls) == (None, len(calls))


def test_lines_without_letters_are_not_counted() -> None:
    """Braces, fences and blank lines repeat in every multi-call reply and never count."""
    text = "\n".join(["}", "```", "", "  },", "[1]"] * 20)
    assert stream(RepetitionDetector(), text) == (None, len(text))


def native(index: int, arguments: str, name: str | None = "ping") -> list[StreamChunk]:
    """A native call streamed as llama-server does: the name first, then argument pieces."""
    head = ToolCallDeltaChunk(index=index, call_id=f"call_{index}", name=name)
    pieces = [arguments[i : i + 4] for i in range(0, len(arguments), 4)]
    return [head, *(ToolCallDeltaChunk(index=index, arguments_delta=p) for p in pieces)]


def test_native_calls_repeated_are_found() -> None:
    """The same native call in three tool-call deltas is found once the third's arguments close."""
    detector = RepetitionDetector()
    chunks = [c for i in range(5) for c in native(i, '{"host": "example.org"}')]
    found = [detector.feed(c) for c in chunks]
    first = found.index(next(f for f in found if f is not None))
    assert first == 3 * len(native(0, '{"host": "example.org"}')) - 1
    assert found[-1] == Repetition(
        kind="call", text='{"arguments":{"host":"example.org"},"name":"ping"}', count=3
    )


def test_a_reset_forgets_the_reply_so_far() -> None:
    """After a ResetChunk (a preempted reply restarts) earlier copies no longer count."""
    detector = RepetitionDetector()
    line = CHECK % "aspirin" + "\n"
    assert stream(detector, line * 2)[0] is None
    detector.feed(ResetChunk("preempted"))
    assert stream(detector, line * 2)[0] is None
    assert stream(detector, line)[0] is not None


def test_a_found_repetition_stays_found() -> None:
    """Once degenerate, every later chunk returns the same finding."""
    detector = RepetitionDetector()
    found, _ = stream(detector, (CHECK % "aspirin" + "\n") * 3)
    assert detector.feed(TextDeltaChunk("more")) is found


def test_thresholds_below_two_are_refused() -> None:
    """A single copy is not a repetition: the detector says so at construction."""
    with pytest.raises(
        ValueError,
        match=r"^a repetition needs at least 2 copies, got call_repeats=1, line_repeats=8$",
    ):
        RepetitionDetector(call_repeats=1)


def test_the_reason_names_what_repeated() -> None:
    """The reason is a sentence naming the kind, the count and the repeated text."""
    found = Repetition(kind="line", text="<function>", count=8)
    assert found.reason == "the reply wrote the same line 8 times: <function>"


def test_a_reply_stopped_for_repeating_is_told_so_not_that_it_hit_the_limit() -> None:
    """The real 0.5B's looping respond message was stopped on the stream; its retry said "cut
    off at the length limit", which it was not."""
    from forge_rt.core import LLMResponse, TextResponse
    from forge_rt.guardrails import REPETITION_FINISH_REASON, Guardrails, RetryWithNudge

    looped = '{"name": "respond", "arguments": {"message": "Total: 40 EUR\\nTotal: 65 EUR\\nTot'
    guard = Guardrails([], respond_tool=True)
    texts = {}
    for finish in (REPETITION_FINISH_REASON, "length"):
        reply = LLMResponse(result=TextResponse(content=looped), finish_reason=finish)
        action = guard.check(reply, constrained=True)
        assert isinstance(action, RetryWithNudge)
        texts[finish] = action.nudge.content
    assert "kept writing the same lines" in texts[REPETITION_FINISH_REASON]
    assert "length limit" not in texts[REPETITION_FINISH_REASON]
    assert "cut off at the length limit" in texts["length"]


def test_a_value_stopped_for_looping_is_the_value_written_once() -> None:
    """A respond message stopped while it wrote the same two sentences over and over is the
    answer it wrote, once; cut at the token limit instead, nothing says where it went wrong,
    and the reply is sent back."""
    from forge_rt.core import LLMResponse, TextResponse
    from forge_rt.guardrails import REPETITION_FINISH_REASON, Execute, Guardrails, RetryWithNudge

    once = "The quay was rebuilt in 1911 by the Marten yard. The yard closed the same winter."
    message = "Nobody logged the tides. " + " ".join([once] * 5) + " The quay was reb"
    looped = json.dumps({"name": "respond", "arguments": {"message": message}})[:-3]
    stopped = LLMResponse(
        result=TextResponse(content=looped), finish_reason=REPETITION_FINISH_REASON
    )
    action = Guardrails([], respond_tool=True).check(stopped, constrained=True)
    assert isinstance(action, Execute)
    [answer] = action.calls
    assert answer.args == {"message": "Nobody logged the tides. " + once}
    capped = LLMResponse(result=TextResponse(content=looped), finish_reason="length")
    assert isinstance(
        Guardrails([], respond_tool=True).check(capped, constrained=True), RetryWithNudge
    )
    assert before_the_loop(json.dumps({"name": "respond", "arguments": {"message": once}})) is None


# The shape of a real 0.5B reply under a constraint: the call, then spaces to the token cap.
REAL_SPACES = '{"name": "get_fx_rate", "arguments": {"base": "USD", "quote": "EUR}}"}' + " " * 2031


def test_a_run_of_whitespace_is_stopped_at_space_run() -> None:
    """The reply is stopped once SPACE_RUN whitespace characters came in a row, however split."""
    found, fed = stream(RepetitionDetector(), REAL_SPACES, size=5)
    assert found == Repetition(kind="space", text="", count=SPACE_RUN)
    assert fed <= len(REAL_SPACES.rstrip()) + SPACE_RUN + 5
    assert "whitespace" in found.reason


def test_indentation_and_a_blank_line_are_no_run() -> None:
    """The healthy maximum in the real replies: a line break and 20 spaces; and mixed runs that
    are each below SPACE_RUN."""
    cities = ["Turku", "Bergen", "Lima", "Minsk", "Quito"]
    text = "".join(f'\n{" " * 20}"city": "{c}",' for c in cities) + " " * (SPACE_RUN - 1) + "}"
    assert stream(RepetitionDetector(), text)[0] is None


def test_whitespace_in_native_call_arguments_counts_too() -> None:
    detector = RepetitionDetector()
    found = [detector.feed(c) for c in native(0, '{"host": "example.org"' + " " * SPACE_RUN)]
    assert found[-1] == Repetition(kind="space", text="", count=SPACE_RUN)
