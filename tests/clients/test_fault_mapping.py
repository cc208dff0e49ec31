"""Every fault maps to its typed error: each backend fault to a ``BackendError`` of its
:class:`~forge_rt.errors.FaultKind`, a wrong client option to a ``ClientOptionError``.

Like httpx's "all exceptions are mapped" test: each ``FaultKind`` is produced for real, over real
sockets -- the simulated backend, a port nobody listens on, a listener whose backlog is full, a
byte-scripted server -- and the error's ``kind`` and ``retry_safe`` are asserted. Each test that
produces a kind says so with ``@produces``; :func:`test_every_fault_kind_is_produced_here` fails
when ``FaultKind`` gains a member no test here produces. Time-bound faults run on trio's
autojump clock, so no test waits in real time.
"""

from __future__ import annotations

import inspect
import socket
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import msgspec
import pytest
import trio
from clients_support import WEATHER
from scripted_server import Reply, scripted_server, sse

from forge_rt.backends.sim import Fault, SimBackend, SimConfig, SimReply
from forge_rt.clients import HTTPClient, make_client
from forge_rt.clients._factory import (
    AnthropicOptions,
    LlamaServerOptions,
    OllamaOptions,
    OpenAIOptions,
    VLLMOptions,
)
from forge_rt.core import BackendChunk, InferenceRequest, Message, StreamChunk, TextDeltaChunk
from forge_rt.errors import BackendError, ClientOptionError, ContextOverflowError, FaultKind

KINDS = ["openai", "llamaserver", "vllm", "ollama", "anthropic"]
REQUEST = InferenceRequest(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))
TEXT = "The weather in Paris is mild today with a light breeze from the west and clouds. "

PRODUCED: set[FaultKind] = set()

T = TypeVar("T", bound=Callable[..., Any])


def produces(kind: FaultKind) -> Callable[[T], T]:
    """Record that the decorated test makes a ``kind`` fault happen for real."""

    def record(test: T) -> T:
        PRODUCED.add(kind)
        return test

    return record


def client_for(kind: str, url: str, **opts: Any) -> HTTPClient:
    """An adapter of ``kind`` for a server at ``url``."""
    base: dict[str, Any] = {"model": "sim-model"}
    if kind == "anthropic":
        base["api_key"] = "sk-test"
    return make_client(kind, url, **{**base, **opts})  # type: ignore[arg-type]


@asynccontextmanager
async def sim_and_client(
    kind: str, config: SimConfig | None = None, **opts: Any
) -> AsyncIterator[tuple[SimBackend, HTTPClient]]:
    """A sim that answers every request with ``TEXT`` (or as ``config`` says), and a client."""
    config = config or SimConfig(script={"*": [SimReply(text=TEXT)]})
    async with SimBackend.serve(config) as sim, client_for(kind, sim.url, **opts) as client:
        yield sim, client


def with_fault(fault: Fault) -> InferenceRequest:
    """The standard request, asking the sim for ``fault`` through its per-call header."""
    return InferenceRequest(
        messages=REQUEST.messages, tools=REQUEST.tools, headers={"x-sim-fault": fault.value}
    )


async def stream_into(
    seen: list[BackendChunk], client: HTTPClient, request: InferenceRequest
) -> None:
    """Read one streamed call to its end, appending each chunk to ``seen`` as it arrives (so
    ``seen`` holds what was delivered when the stream fails)."""
    async with client.stream(request) as chunks:
        async for chunk in chunks:
            seen.append(chunk)


def _closed_port() -> int:
    """A local port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def full_backlog_url() -> Iterator[str]:
    """The URL of a listener that never accepts and whose backlog is already full.

    The kernel (Linux, macOS) drops SYNs to a full accept queue, so a new connection is neither
    made nor refused: it waits until the client's connect timeout.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        with socket.create_connection(address):  # takes the one place in the backlog
            yield f"http://{address[0]}:{address[1]}"


# -- connecting ------------------------------------------------------------------------------


@produces(FaultKind.CONNECT_REFUSED)
@pytest.mark.parametrize("kind", KINDS)
async def test_nothing_listening_is_connect_refused_and_retry_safe(kind: str) -> None:
    """A port nobody listens on is CONNECT_REFUSED, safe to retry, from httpx's ConnectError."""
    with trio.fail_after(10):
        async with client_for(kind, f"http://127.0.0.1:{_closed_port()}") as client:
            with pytest.raises(BackendError) as info:
                await client.send(REQUEST)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.CONNECT_REFUSED, True)
    assert isinstance(info.value.__cause__, httpx.ConnectError)


@produces(FaultKind.CONNECT_TIMEOUT)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_connection_never_accepted_is_connect_timeout_and_retry_safe(
    kind: str, full_backlog_url: str, autojump_clock: trio.abc.Clock
) -> None:
    """A listener that never completes the handshake is CONNECT_TIMEOUT, safe to retry."""
    async with client_for(kind, full_backlog_url, connect_timeout=5.0) as client:
        with pytest.raises(BackendError) as info:
            await client.send(REQUEST)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.CONNECT_TIMEOUT, True)
    assert isinstance(info.value.__cause__, httpx.ConnectTimeout)


# -- waiting for the reply -------------------------------------------------------------------


@produces(FaultKind.READ_TIMEOUT)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_never_answers_is_read_timeout_and_retry_safe(
    kind: str, autojump_clock: trio.abc.Clock
) -> None:
    """No byte within read_timeout is READ_TIMEOUT, safe to retry: nothing was generated."""
    async with sim_and_client(kind, read_timeout=5.0) as (_, client):
        with pytest.raises(BackendError) as info:
            await client.send(with_fault(Fault.HANG))
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.READ_TIMEOUT, True)
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


@produces(FaultKind.DEADLINE)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_drip_that_outlasts_the_deadline_on_send_is_deadline_and_retry_safe(
    kind: str, autojump_clock: trio.abc.Clock
) -> None:
    """A whole reply still dripping in at the deadline is DEADLINE, safe: nothing was delivered."""
    config = SimConfig(script={"*": [SimReply(text=TEXT * 20)]}, slow_drip_interval_s=0.01)
    async with sim_and_client(kind, config, read_timeout=5.0, deadline=10.0) as (_, client):
        with pytest.raises(BackendError, match=r"did not finish within its 10 s deadline") as info:
            await client.send(with_fault(Fault.SLOW_DRIP))
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.DEADLINE, True)


@produces(FaultKind.DEADLINE)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_past_its_deadline_after_output_is_deadline_and_not_retry_safe(
    kind: str, autojump_clock: trio.abc.Clock
) -> None:
    """A stream cut by the deadline after deltas reached the caller is DEADLINE, not safe.

    (The deadline leaves time for llama-server's reports on the prompt, dripped first.)"""
    config = SimConfig(script={"*": [SimReply(text=TEXT * 20)]}, slow_drip_interval_s=0.01)
    seen: list[BackendChunk] = []
    async with sim_and_client(kind, config, read_timeout=5.0, deadline=20.0) as (_, client):
        with pytest.raises(BackendError) as info:
            await stream_into(seen, client, with_fault(Fault.SLOW_DRIP))
    assert any(isinstance(c, TextDeltaChunk) for c in seen)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.DEADLINE, False)


# -- the server's answer ---------------------------------------------------------------------


@produces(FaultKind.SERVER_ERROR)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fault", [Fault.HTTP_500, Fault.HTTP_503], ids=["500", "503"])
async def test_a_5xx_status_is_server_error_and_retry_safe(kind: str, fault: Fault) -> None:
    """An error status of 500 or above is SERVER_ERROR, safe to retry, with its status kept."""
    with trio.fail_after(10):
        async with sim_and_client(kind) as (_, client):
            with pytest.raises(BackendError) as info:
                await client.send(with_fault(fault))
    assert (info.value.kind, info.value.retry_safe, info.value.status) == (
        FaultKind.SERVER_ERROR,
        True,
        int(fault.value[-3:]),
    )


@produces(FaultKind.SERVER_ERROR)
async def test_an_error_object_in_a_2xx_reply_is_server_error_and_retry_safe() -> None:
    """A 200 whose body is an error object is the server's error, safe: no reply was made."""
    error = {"error": {"code": 500, "message": "out of memory", "type": "server_error"}}
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(error)) as server,
            client_for("openai", server.url) as client,
        ):
            with pytest.raises(BackendError) as info:
                await client.send(REQUEST)
    assert (info.value.kind, info.value.retry_safe, info.value.body) == (
        FaultKind.SERVER_ERROR,
        True,
        "out of memory",
    )


@produces(FaultKind.SERVER_ERROR)
async def test_an_error_event_after_output_is_server_error_and_not_retry_safe() -> None:
    """An error reported inside a stream after a delta is SERVER_ERROR, no longer safe."""
    delta = {"choices": [{"index": 0, "delta": {"content": "It is"}, "finish_reason": None}]}
    error = {"error": {"code": 500, "message": "kv cache full"}}
    reply = Reply(parts=sse(delta, error), content_type="text/event-stream")
    seen: list[StreamChunk] = []
    with trio.fail_after(10):
        async with scripted_server(reply) as server, client_for("openai", server.url) as client:
            with pytest.raises(BackendError) as info:
                await stream_into(seen, client, REQUEST)
    assert [TextDeltaChunk("It is")] == seen
    assert (info.value.kind, info.value.retry_safe, info.value.body) == (
        FaultKind.SERVER_ERROR,
        False,
        "kv cache full",
    )


@produces(FaultKind.CLIENT_ERROR)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_rejected_request_is_client_error_and_not_retry_safe(kind: str) -> None:
    """A 4xx for the request itself (here: longer than the context) is CLIENT_ERROR, not safe."""
    config = SimConfig(script={"*": [SimReply(text=TEXT)]}, n_ctx=4)
    with trio.fail_after(10):
        async with sim_and_client(kind, config) as (_, client):
            with pytest.raises(BackendError) as info:
                await client.send(REQUEST)
    assert (info.value.kind, info.value.retry_safe, info.value.status) == (
        FaultKind.CLIENT_ERROR,
        False,
        400,
    )
    # The backend said why, with its counts: a typed overflow a workflow can compact for.
    assert isinstance(info.value, ContextOverflowError)
    assert info.value.context_tokens == 4
    assert info.value.prompt_tokens is not None
    assert info.value.prompt_tokens > 4


@pytest.mark.parametrize(
    ("body", "counts"),
    [
        (  # llama-server, as the real 0.5B server answered an eval run
            {
                "error": {
                    "code": 400,
                    "message": "request (4207 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4207,
                    "n_ctx": 4096,
                }
            },
            (4207, 4096),
        ),
        (  # OpenAI: a code, no counts
            {"error": {"message": "too long", "code": "context_length_exceeded", "type": "x"}},
            (None, None),
        ),
        (  # vLLM
            {
                "object": "error",
                "message": "This model's maximum context length is 2048 tokens. However, you "
                "requested 2100 tokens (2000 in the messages, 100 in the completion).",
            },
            (2100, 2048),
        ),
    ],
)
async def test_each_backends_context_overflow_is_read_with_its_counts(
    body: dict[str, object], counts: tuple[int | None, int | None]
) -> None:
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(body, status=400)) as server,
            client_for("openai", server.url) as client,
        ):
            with pytest.raises(ContextOverflowError) as info:
                await client.send(REQUEST)
    assert (info.value.prompt_tokens, info.value.context_tokens) == counts
    assert info.value.status == 400


async def test_another_400_stays_a_plain_client_error() -> None:
    refused = Reply.json({"error": {"message": "bad tool schema", "type": "invalid"}}, status=400)
    with trio.fail_after(10):
        async with scripted_server(refused) as server, client_for("openai", server.url) as client:
            with pytest.raises(BackendError) as info:
                await client.send(REQUEST)
    assert not isinstance(info.value, ContextOverflowError)


@produces(FaultKind.CLIENT_ERROR)
@pytest.mark.parametrize("status", [408, 429])
async def test_a_busy_backend_is_client_error_and_retry_safe(status: int) -> None:
    """408 and 429 are CLIENT_ERROR but safe to retry later: the backend was only busy."""
    busy = Reply.json({"error": {"message": "slots busy"}}, status=status)
    with trio.fail_after(10):
        async with scripted_server(busy) as server, client_for("openai", server.url) as client:
            with pytest.raises(BackendError) as info:
                await client.send(REQUEST)
    assert (info.value.kind, info.value.retry_safe, info.value.status) == (
        FaultKind.CLIENT_ERROR,
        True,
        status,
    )


# -- the connection dropping -----------------------------------------------------------------


@produces(FaultKind.RESET_BEFORE_FIRST_BYTE)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_reset_before_any_byte_twice_is_reset_before_first_byte_and_retry_safe(
    kind: str,
) -> None:
    """A reset before the reply started, again after the one automatic retry, reaches the
    caller as RESET_BEFORE_FIRST_BYTE, safe to retry."""
    with trio.fail_after(10):
        async with sim_and_client(kind) as (sim, client):
            sim.inject(Fault.RESET_BEFORE_FIRST_BYTE, count=2)
            with pytest.raises(BackendError) as info:
                await client.send(REQUEST)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.RESET_BEFORE_FIRST_BYTE, True)
    assert isinstance(info.value.__cause__, httpx.TransportError)


@produces(FaultKind.RESET_MID_STREAM)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_body_cut_before_it_was_delivered_is_reset_mid_stream_and_retry_safe(
    kind: str,
) -> None:
    """A whole reply cut off half-way is RESET_MID_STREAM, safe: the caller saw none of it."""
    with trio.fail_after(10):
        async with sim_and_client(kind) as (_, client):
            with pytest.raises(BackendError) as info:
                await client.send(with_fault(Fault.RESET_MID_STREAM))
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.RESET_MID_STREAM, True)
    assert isinstance(info.value.__cause__, httpx.TransportError)


@produces(FaultKind.RESET_MID_STREAM)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_cut_after_output_is_reset_mid_stream_and_not_retry_safe(
    kind: str,
) -> None:
    """A stream whose connection dies after deltas were delivered is RESET_MID_STREAM, not safe."""
    seen: list[StreamChunk] = []
    with trio.fail_after(10):
        async with sim_and_client(kind) as (_, client):
            with pytest.raises(BackendError) as info:
                await stream_into(seen, client, with_fault(Fault.RESET_MID_STREAM))
    assert any(isinstance(c, TextDeltaChunk) for c in seen)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.RESET_MID_STREAM, False)


# -- a reply of the wrong shape --------------------------------------------------------------


@produces(FaultKind.MALFORMED_RESPONSE)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_body_that_is_not_the_apis_reply_is_malformed_response(kind: str) -> None:
    """A complete body cut mid-JSON is MALFORMED_RESPONSE, retry-safe, with the body kept."""
    with trio.fail_after(10):
        async with sim_and_client(kind) as (_, client):
            with pytest.raises(BackendError) as info:
                await client.send(with_fault(Fault.TRUNCATED_JSON))
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.MALFORMED_RESPONSE, True)
    assert info.value.body


def test_every_fault_kind_is_produced_here() -> None:
    """Each FaultKind has a test above that produces it; a new kind needs one too."""
    assert set(FaultKind) == PRODUCED


# -- the caller's fault: options make_client cannot use --------------------------------------


def test_an_option_the_kind_does_not_take_names_the_option_and_the_kind() -> None:
    """An API key for Ollama is a ClientOptionError listing what Ollama does take."""
    with pytest.raises(
        ClientOptionError,
        match=r"^make_client: kind 'ollama' takes no option 'api_key'; it takes connect_timeout, "
        r"deadline, headers, keep_alive, model, num_ctx, read_timeout, recommended_sampling, "
        r"think, transport$",
    ) as info:
        make_client("ollama", "http://127.0.0.1:9", model="m", api_key="k")
    assert (info.value.kind, info.value.option) == ("ollama", "api_key")


def test_a_required_option_left_out_names_it() -> None:
    """An Anthropic client without its API key is a ClientOptionError naming ``api_key``."""
    with pytest.raises(
        ClientOptionError,
        match=r"^make_client: kind 'anthropic' needs option 'api_key'; pass api_key=\.\.\.$",
    ) as info:
        make_client("anthropic", "http://127.0.0.1:9", model="m")
    assert (info.value.kind, info.value.option) == ("anthropic", "api_key")


@pytest.mark.parametrize(
    ("kind", "option", "value", "expected"),
    [
        ("openai", "read_timeout", "10", r"Expected `float`, got `str`"),
        ("llamaserver", "mode", "grammar", r"Invalid enum value 'grammar'"),
        ("ollama", "model", None, r"Expected `str`, got `null`"),
        ("vllm", "recommended_sampling", 1, r"Expected `bool`, got `int`"),
        ("anthropic", "transport", "h2", r"Expected `AsyncBaseTransport`, got `str`"),
    ],
    ids=["float", "literal", "required-str", "bool", "transport"],
)
def test_a_value_of_the_wrong_type_names_the_option_expected_and_got(
    kind: str, option: str, value: object, expected: str
) -> None:
    """A wrongly typed value says which option, of which kind, expected what and got what."""
    options: dict[str, object] = {"model": "m", "api_key": "k"} if kind == "anthropic" else {}
    options[option] = value
    with pytest.raises(
        ClientOptionError, match=rf"^make_client: option '{option}' of kind '{kind}': {expected}$"
    ) as info:
        make_client(kind, "http://127.0.0.1:9", **options)  # type: ignore[arg-type]
    assert (kind, option) == (info.value.kind, info.value.option)


def _members(annotation: object) -> set[object]:
    """The members of a union annotation (``msgspec.UNSET`` left out), or the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set(typing.get_args(annotation)) - {msgspec.UnsetType}
    return {annotation}


@pytest.mark.parametrize(
    "options",
    [OpenAIOptions, LlamaServerOptions, OllamaOptions, VLLMOptions, AnthropicOptions],
    ids=lambda o: o.__name__,
)
def test_each_options_struct_mirrors_its_adapters_keyword_arguments(
    options: type[OpenAIOptions],
) -> None:
    """Each kind's options are exactly its adapter's keyword arguments, of the same types, and
    required exactly where the adapter has no default."""
    adapter = options.adapter
    hints = typing.get_type_hints(adapter.__init__)
    params = inspect.signature(adapter).parameters.values()
    keyword = {p.name: p for p in params if p.kind is p.KEYWORD_ONLY}
    fields = {f.name: f for f in msgspec.structs.fields(options)}
    assert {n: (p.default is p.empty, _members(hints[n])) for n, p in keyword.items()} == {
        n: (f.required, _members(f.type)) for n, f in fields.items()
    }


def test_an_options_repr_hides_the_api_key() -> None:
    """A client options struct never shows its API key in a repr."""
    from forge_rt.clients._factory import AnthropicOptions

    options = AnthropicOptions(api_key="sk-secret-123", model="m")
    assert repr(options) == "AnthropicOptions(api_key=***, model='m')"
