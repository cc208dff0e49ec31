"""What one request did travels as headers and is read back the same from an answer or an error."""

from __future__ import annotations

import httpx
import pytest

from forge_rt.errors import ToolCallError
from forge_rt.proxy import RequestWork
from forge_rt.proxy._errors import from_forge_error
from forge_rt.runtime import RunStats


def _as_response_headers(pairs: list[tuple[bytes, bytes]]) -> httpx.Headers:
    return httpx.Headers([(k.decode(), v.decode()) for k, v in pairs])


def test_the_headers_read_back_as_the_work_that_wrote_them() -> None:
    stats = RunStats(inferences=3, rules={"zeta_rule": 1, "alpha_rule": 2}, repetition_stops=1)
    work = RequestWork.of(stats, rescued=("fenced_json", "python_call"))

    headers = _as_response_headers(work.headers())

    assert headers["x-forge-rules"] == "alpha_rule=2,zeta_rule=1"  # by name, stable order
    assert RequestWork.from_headers(headers) == work


def test_counts_of_none_are_left_out_but_the_attempts_never_are() -> None:
    assert RequestWork(inferences=0).headers() == [(b"x-forge-attempts", b"0")]


def test_a_response_without_the_headers_reports_no_work() -> None:
    assert RequestWork.from_headers(httpx.Headers({"content-type": "application/json"})) is None


def test_a_rules_header_the_proxy_does_not_write_is_an_error() -> None:
    headers = httpx.Headers({"x-forge-attempts": "2", "x-forge-rules": "no_count_here"})
    with pytest.raises(ValueError, match="rule=count"):
        RequestWork.from_headers(headers)


def test_a_failed_request_carries_its_work_as_an_answer_does() -> None:
    work = RequestWork(inferences=4, rules={"some_rule": 3}, repetition_stops=2)
    error = ToolCallError("no call", attempts=4, cause="cut off", last_raw="{")

    answer = from_forge_error(error, work=work)

    assert RequestWork.from_headers(_as_response_headers(answer.headers())) == work
    assert from_forge_error(error).headers() == [
        (b"x-should-retry", b"false"),
        (b"x-forge-error", b"tool_call_retries_exhausted"),
    ]
