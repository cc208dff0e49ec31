"""Managed-backend specs: argv per kind, URLs, readiness verdicts, and _serve accepting the argv."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from forge_rt.backends.local import SERVE_COMMAND
from forge_rt.backends.local._serve import build_parser
from forge_rt.backends.managed import (
    BackendKind,
    Probe,
    free_loopback_port,
    judge_probe,
    llama_server_spec,
    ollama_spec,
    vllm_spec,
)


def test_llama_server_argv_has_model_ctx_jinja_slots_metrics_and_extras() -> None:
    """llama-server gets the model, context, slots, loopback host, port and the chosen extras."""
    spec = llama_server_spec(
        "/m/q.gguf",
        ctx_size=8192,
        parallel=2,
        threads=4,
        gpu_layers=99,
        alias="qwen",
        port=8091,
        extra_args=["--cache-reuse", "256"],
    )
    assert spec.argv == (
        "llama-server",
        "--model",
        "/m/q.gguf",
        "--ctx-size",
        "8192",
        "--parallel",
        "2",
        "--host",
        "127.0.0.1",
        "--port",
        "8091",
        "--jinja",
        "--metrics",
        "--slots",
        "--threads",
        "4",
        "--n-gpu-layers",
        "99",
        "--alias",
        "qwen",
        "--cache-reuse",
        "256",
    )
    assert (spec.kind, spec.ready_url) == (BackendKind.LLAMA_SERVER, "http://127.0.0.1:8091/health")


def test_llama_server_leaves_out_unset_optional_flags() -> None:
    """Threads, GPU layers and alias are only passed when given, leaving llama.cpp its defaults."""
    argv = llama_server_spec("m.gguf", port=8092).argv
    assert not {"--threads", "--n-gpu-layers", "--alias"} & set(argv)


def test_vllm_argv_has_served_name_length_and_tool_parser() -> None:
    """vllm serve gets the model, served name, max length, address and tool-call parsing flags."""
    spec = vllm_spec(
        "/models/qwen-awq",
        served_model_name="qwen",
        max_model_len=16384,
        port=8093,
        extra_args=["--gpu-memory-utilization", "0.8"],
    )
    assert spec.argv == (
        "vllm",
        "serve",
        "/models/qwen-awq",
        "--served-model-name",
        "qwen",
        "--max-model-len",
        "16384",
        "--host",
        "127.0.0.1",
        "--port",
        "8093",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--gpu-memory-utilization",
        "0.8",
    )
    assert (spec.model, spec.ready_url) == ("qwen", "http://127.0.0.1:8093/v1/models")


def test_vllm_without_tool_parser_drops_both_tool_flags_and_expects_the_model_path() -> None:
    """tool_call_parser=None removes the auto-tool-choice pair; the expected name is the model."""
    spec = vllm_spec("org/model", tool_call_parser=None, port=8094)
    assert spec.argv == ("vllm", "serve", "org/model", "--host", "127.0.0.1", "--port", "8094")
    assert spec.model == "org/model"


def test_ollama_binds_through_ollama_host_and_expects_the_model() -> None:
    """ollama serve is bound by OLLAMA_HOST (plus optional knobs) and checked on /api/tags."""
    spec = ollama_spec(
        "qwen2.5-coder:0.5b", num_parallel=3, port=8095, env={"OLLAMA_KEEP_ALIVE": "-1"}
    )
    assert spec.argv == ("ollama", "serve")
    assert spec.env == {
        "OLLAMA_HOST": "127.0.0.1:8095",
        "OLLAMA_NUM_PARALLEL": "3",
        "OLLAMA_KEEP_ALIVE": "-1",
    }
    assert spec.ready_url == "http://127.0.0.1:8095/api/tags"


def test_executable_may_be_a_command_prefix() -> None:
    """A sequence executable is a command prefix, which is how the embedded server is run."""
    spec = ollama_spec("m", executable=["/opt/bin/ollama", "--verbose"], port=8096)
    assert spec.argv == ("/opt/bin/ollama", "--verbose", "serve")


def test_wildcard_bind_is_reached_over_loopback() -> None:
    """A server bound to 0.0.0.0 or :: is probed and reached through loopback."""
    assert llama_server_spec("m", host="0.0.0.0", port=9000).base_url == "http://127.0.0.1:9000"
    assert llama_server_spec("m", host="::", port=9001).base_url == "http://[::1]:9001"


def test_port_none_picks_a_free_loopback_port() -> None:
    """Leaving the port out picks one that can be bound on loopback right now."""
    spec = llama_server_spec("m.gguf")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", spec.port))
    assert 0 < free_loopback_port() < 65536


def test_serve_accepts_every_flag_llama_server_spec_emits() -> None:
    """The embedded server's entry point parses the managed llama-server argv into its params."""
    spec = llama_server_spec(
        "/m/q.gguf", ctx_size=2048, parallel=3, threads=2, gpu_layers=0, alias="q", port=8097
    )
    args = build_parser().parse_args([*list(spec.argv[1:]), "--props"])
    assert (
        args.model,
        args.ctx_size,
        args.parallel,
        args.host,
        args.port,
        args.threads,
        args.n_gpu_layers,
        args.alias,
    ) == ("/m/q.gguf", 2048, 3, "127.0.0.1", 8097, 2, 0, "q")
    assert (args.jinja, args.metrics, args.slots, args.props) == (True, True, True, True)


def test_the_batch_size_reaches_the_embedded_servers_params() -> None:
    """--batch-size / --ubatch-size from the spec set llama.cpp's n_batch and n_ubatch."""
    from forge_rt.backends.local import PREEMPTIBLE_BATCH, LocalModelServer
    from forge_rt.backends.local._serve import _params

    spec = LocalModelServer.spec(Path("/m/q.gguf"), n_ctx=2048, n_parallel=2, threads=2, port=8098)
    argv = list(spec.argv)
    at = argv.index("--batch-size")
    assert argv[at : at + 4] == ["--batch-size", "128", "--ubatch-size", "128"]
    assert PREEMPTIBLE_BATCH == 128
    params = _params(build_parser().parse_args(argv[len(SERVE_COMMAND) :]))
    assert (params.n_batch, params.n_ubatch) == (128, 128)
    default = LocalModelServer.spec(
        Path("/m/q.gguf"), n_ctx=2048, n_parallel=2, threads=2, port=8099, batch_size=None
    )
    assert "--batch-size" not in default.argv
    assert "--batch-size" not in llama_server_spec("m.gguf", port=8096).argv


def test_serve_accepts_llama_server_short_flags() -> None:
    """The short spellings users know from llama-server (-m, -c, -np, -t) work too."""
    args = build_parser().parse_args(["-m", "x.gguf", "-c", "1024", "-np", "2", "-t", "1"])
    assert (args.model, args.ctx_size, args.parallel, args.threads) == ("x.gguf", 1024, 2, 1)


LLAMA = llama_server_spec("m", port=8100)
VLLM = vllm_spec("m", served_model_name="qwen", port=8101)
OLLAMA = ollama_spec("qwen2.5-coder", port=8102)


@pytest.mark.parametrize(
    ("spec", "status", "body", "expected"),
    [
        pytest.param(
            LLAMA,
            503,
            b'{"error":"Loading model"}',
            Probe(False, LLAMA.ready_url + " answered HTTP 503"),
            id="llama-loading",
        ),
        pytest.param(LLAMA, 200, b'{"status":"ok"}', Probe(True), id="llama-ok"),
        pytest.param(VLLM, 200, b'{"data":[{"id":"qwen"}]}', Probe(True), id="vllm-served"),
        pytest.param(
            OLLAMA,
            200,
            b'{"models":[{"name":"qwen2.5-coder:latest"}]}',
            Probe(True),
            id="ollama-latest-tag",
        ),
    ],
)
def test_probe_verdicts(spec, status: int, body: bytes, expected: Probe) -> None:
    """Readiness answers are judged per kind: loading waits, a listed model is ready."""
    assert expected == judge_probe(spec, status, body)


def test_ollama_without_the_model_is_fatal_and_says_to_pull_it() -> None:
    """Ollama answering without the wanted model is not worth waiting for: it says `ollama pull`."""
    probe = judge_probe(OLLAMA, 200, b'{"models":[{"name":"llama3:8b","model":"llama3:8b"}]}')
    assert (probe.ready, probe.fatal) == (False, True)
    assert probe.reason == (
        "ollama at http://127.0.0.1:8102 serves ['llama3:8b'], not 'qwen2.5-coder': pull it first "
        "with `ollama pull qwen2.5-coder` (models are shared by every server)"
    )


def test_vllm_serving_another_name_is_fatal() -> None:
    """vLLM listing a different served name is a misconfiguration, reported at once."""
    probe = judge_probe(VLLM, 200, b'{"data":[{"id":"other"}]}')
    assert (probe.ready, probe.fatal) == (False, True)
    assert "serves ['other'], not 'qwen'" in probe.reason


def test_a_foreign_server_on_the_port_is_fatal() -> None:
    """A 200 that is not the kind's JSON means something else owns the port."""
    probe = judge_probe(VLLM, 200, b"<html>hello</html>")
    assert (probe.ready, probe.fatal) == (False, True)
    assert re.search(
        r"answered 200 but not as vllm does: .*; is another server on port 8101\?$", probe.reason
    )
