"""GPU memory through NVML: what is there, and why nothing is when nothing is.

The probe is a closed union so a caller must handle each case: :class:`GpuAvailable` (with every
device that answered, and every device that did not), :class:`NoGpu` (NVML works but counts no
device) and :class:`NvmlUnavailable` (the library or the driver is missing; NVML's own message is
kept). Nothing here guesses a size for a device it could not read, and nothing shells out to
``nvidia-smi``.

NVML calls block (``nvmlInit`` can take tens of milliseconds with a driver loaded): from trio code
run :func:`probe_gpu` through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
import pynvml

__all__ = [
    "GpuAvailable",
    "GpuDeviceError",
    "GpuMemory",
    "GpuProbe",
    "HardwareProfile",
    "NoGpu",
    "NvmlModule",
    "NvmlUnavailable",
    "probe_gpu",
]


class NvmlModule(Protocol):
    """The part of the ``pynvml`` module the probe uses; tests pass a small fake with these names."""

    NVMLError: type[Exception]

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int: ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...

    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...


class GpuMemory(msgspec.Struct, frozen=True, kw_only=True):
    """Memory of one GPU as NVML reports it, in bytes."""

    index: int
    name: str
    total_bytes: int
    used_bytes: int
    free_bytes: int


class GpuDeviceError(msgspec.Struct, frozen=True, kw_only=True):
    """A device NVML counted but could not read; ``call`` is the NVML function that failed."""

    index: int
    call: str
    reason: str


class GpuAvailable(msgspec.Struct, frozen=True, kw_only=True, tag="gpu"):
    """NVML counted at least one device.

    ``devices`` holds every device that answered; ``failed`` every one that did not, so a
    partial read is visible rather than silently smaller.
    """

    devices: tuple[GpuMemory, ...]
    failed: tuple[GpuDeviceError, ...] = ()

    @property
    def total_bytes(self) -> int:
        """Total memory of the devices that answered."""
        return sum(d.total_bytes for d in self.devices)

    @property
    def free_bytes(self) -> int:
        """Free memory of the devices that answered."""
        return sum(d.free_bytes for d in self.devices)


class NoGpu(msgspec.Struct, frozen=True, kw_only=True, tag="no_gpu"):
    """NVML initialised and reported zero devices."""

    reason: str


class NvmlUnavailable(msgspec.Struct, frozen=True, kw_only=True, tag="nvml_unavailable"):
    """NVML could not be used at all (library missing, driver not loaded, no permission)."""

    reason: str


GpuProbe = GpuAvailable | NoGpu | NvmlUnavailable


def _nvml_reason(call: str, exc: BaseException) -> str:
    return f"{call} failed: {exc} ({type(exc).__name__})"


def probe_gpu(nvml: NvmlModule | None = None) -> GpuProbe:
    """Read every GPU's memory through NVML; blocking, so call it from a worker thread in trio.

    ``nvml`` defaults to the real ``pynvml`` module. NVML is initialised and shut down within the
    call. An ``NVMLError`` from initialisation or from counting devices yields
    :class:`NvmlUnavailable`; one from a single device is recorded in ``GpuAvailable.failed`` and
    the probe goes on with the next device. Errors that are not ``NVMLError``, and any error from
    ``nvmlShutdown``, propagate.
    """
    lib: Any = pynvml if nvml is None else nvml
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        return NvmlUnavailable(reason=_nvml_reason("nvmlInit", exc))
    try:
        try:
            count = int(lib.nvmlDeviceGetCount())
        except lib.NVMLError as exc:
            return NvmlUnavailable(reason=_nvml_reason("nvmlDeviceGetCount", exc))
        if count == 0:
            return NoGpu(reason="NVML initialised and reported 0 devices")
        devices: list[GpuMemory] = []
        failed: list[GpuDeviceError] = []
        for index in range(count):
            read = _read_device(lib, index)
            if isinstance(read, GpuDeviceError):
                failed.append(read)
            else:
                devices.append(read)
        return GpuAvailable(devices=tuple(devices), failed=tuple(failed))
    finally:
        lib.nvmlShutdown()


def _read_device(lib: Any, index: int) -> GpuMemory | GpuDeviceError:
    call = "nvmlDeviceGetHandleByIndex"
    try:
        handle = lib.nvmlDeviceGetHandleByIndex(index)
        call = "nvmlDeviceGetName"
        raw_name = lib.nvmlDeviceGetName(handle)
        call = "nvmlDeviceGetMemoryInfo"
        memory = lib.nvmlDeviceGetMemoryInfo(handle)
    except lib.NVMLError as exc:
        return GpuDeviceError(index=index, call=call, reason=_nvml_reason(call, exc))
    # Older pynvml releases return the name as bytes.
    name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
    return GpuMemory(
        index=index,
        name=name,
        total_bytes=int(memory.total),
        used_bytes=int(memory.used),
        free_bytes=int(memory.free),
    )


class HardwareProfile(msgspec.Struct, frozen=True, kw_only=True):
    """What budget resolution knows about the machine: today, the GPU probe."""

    gpu: GpuProbe

    @classmethod
    def detect(cls, nvml: NvmlModule | None = None) -> HardwareProfile:
        """Probe the machine now (blocking; see :func:`probe_gpu`)."""
        return cls(gpu=probe_gpu(nvml))

    def describe(self) -> str:
        """One line for logs and error messages."""
        gpu = self.gpu
        if isinstance(gpu, GpuAvailable):
            parts = [f"{d.name} #{d.index}: {d.total_bytes / 2**30:.1f} GiB" for d in gpu.devices]
            parts += [f"device #{f.index} unreadable ({f.reason})" for f in gpu.failed]
            return "; ".join(parts)
        if isinstance(gpu, NoGpu):
            return f"no GPU ({gpu.reason})"
        return f"NVML unavailable ({gpu.reason})"
