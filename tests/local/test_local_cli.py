"""`forge-rt model show|prepare` over a registry of small fake models."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from structlog.testing import capture_logs

from forge_rt.backends.local._cli import make_model_command, model_command

PARTS = [b"first slice " * 300, b"second slice " * 300]


def test_show_lists_installed_and_missing_parts_and_cache_state(
    make_fake_model, tmp_path: Path
) -> None:
    """show names each model, whether its parts are installed (else the pip command) and its cache."""
    ready = make_fake_model(PARTS)
    broken = make_fake_model(PARTS, install={0})
    command = make_model_command({"ready": ready, "broken": broken}, default="ready")
    result = CliRunner().invoke(command, ["show", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert "ready (default)" in result.output
    assert "  parts   2/2 installed\n" in result.output
    assert f"missing {broken.parts[1].distribution}: pip install 'forge-rt[fake-extra]'" in (
        result.output
    )
    assert result.output.count("not prepared") == 2
    assert ready.sha256 in result.output


def test_prepare_joins_then_reports_already_prepared(make_fake_model, tmp_path: Path) -> None:
    """prepare joins and verifies the file; a second run finds it verified; show says so."""
    model = make_fake_model(PARTS)
    command = make_model_command({"m": model}, default="m")
    cache = str(tmp_path / "c")
    with capture_logs() as logs:
        first = CliRunner().invoke(command, ["prepare", "--cache-dir", cache])
        second = CliRunner().invoke(command, ["prepare", "--model", "m", "--cache-dir", cache])
    assert first.exit_code == 0, first.output
    path = tmp_path / "c" / model.filename
    assert first.output.splitlines()[-1] == f"m: {path} (sha256 {model.sha256} verified)"
    assert path.read_bytes() == b"".join(PARTS)
    assert second.output == f"m: already prepared and verified at {path}\n"
    assert [e["event"] for e in logs] == ["model.join", "model.ready", "model.cached"]
    shown = CliRunner().invoke(command, ["show", "--cache-dir", cache])
    assert f"verified {path}" in shown.output


def test_prepare_with_a_missing_part_fails_with_the_package_name(
    make_fake_model, tmp_path: Path
) -> None:
    """prepare exits 1 with the typed error's message naming the package to install."""
    model = make_fake_model(PARTS, install={1})
    command = make_model_command({"m": model}, default="m")
    result = CliRunner().invoke(command, ["prepare", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert f"Error: model '{model.name}' needs the package '{model.parts[0].distribution}'" in (
        result.output
    )


def test_packaged_command_offers_both_qwen_models() -> None:
    """The shipped `model` group lets --model choose between the two packaged Qwen models."""
    result = CliRunner().invoke(model_command, ["prepare", "--help"])
    assert result.exit_code == 0
    assert "[qwen2.5-coder-0.5b|qwen2.5-coder-1.5b]" in result.output
    assert "[default: qwen2.5-coder-0.5b]" in " ".join(result.output.split())
