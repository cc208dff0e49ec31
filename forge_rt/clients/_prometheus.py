"""Reading a ``/metrics`` page: the Prometheus text format, as llama-server and vLLM publish it.

One parser for every adapter whose server has such a page, so they agree on what a sample is
and on what a page that is not Prometheus text means: a malformed response, like any other body
not of the protocol's shape.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from forge_rt.wire import malformed_error

__all__ = ["metric_samples"]


def metric_samples(raw: bytes, *, url: str) -> dict[str, float]:
    """Every sample of the page ``raw`` by name, as the page writes it (a counter
    ``llamacpp:prompt_tokens`` is ``llamacpp:prompt_tokens_total``); a name repeated with other
    labels keeps its last value.

    A page that is not UTF-8 Prometheus text is ``BackendError(MALFORMED_RESPONSE)``.
    """
    try:
        # The parser is lazy: the whole page has to be read inside the try to be checked.
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(raw.decode())
            for sample in family.samples
        }
    except ValueError as exc:  # the parser's one error; UnicodeDecodeError is one too
        raise malformed_error(f"not Prometheus text ({exc})", url=url, body=raw) from exc
