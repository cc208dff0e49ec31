"""probe_gpu: the real NVML call on this machine, and the mapping logic against a fake NVML."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from forge_rt.context import (
    GpuAvailable,
    GpuDeviceError,
    GpuMemory,
    HardwareProfile,
    NoGpu,
    NvmlUnavailable,
    probe_gpu,
)

GIB = 2**30


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError; its text is NVML's message."""


@dataclass
class Memory:
    total: int
    used: int
    free: int


@dataclass
class FakeDevice:
    name: str | bytes
    memory: Memory | None  # None: the memory query fails
    handle_fails: bool = False


@dataclass
class FakeNvml:
    """The pynvml functions the probe uses, over a scripted list of devices."""

    devices: Sequence[FakeDevice] = ()
    init_error: str | None = None
    count_error: str | None = None
    calls: list[str] = field(default_factory=list)
    NVMLError: type[Exception] = FakeNVMLError

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        if self.count_error:
            raise FakeNVMLError(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        if self.devices[index].handle_fails:
            raise FakeNVMLError("GPU is lost")
        return self.devices[index]

    def nvmlDeviceGetName(self, handle: FakeDevice) -> str | bytes:
        return handle.name

    def nvmlDeviceGetMemoryInfo(self, handle: FakeDevice) -> Memory:
        if handle.memory is None:
            raise FakeNVMLError("Not Supported")
        return handle.memory


def test_real_probe_reports_what_this_machine_has() -> None:
    """The real call returns a typed outcome; without NVML it keeps NVML's own reason."""
    probe = probe_gpu()
    match probe:
        case NvmlUnavailable(reason=reason):
            assert reason.startswith(("nvmlInit failed: ", "nvmlDeviceGetCount failed: "))
            assert "(NVMLError" in reason
        case NoGpu(reason=reason):
            assert reason == "NVML initialised and reported 0 devices"
        case GpuAvailable(devices=devices):
            assert devices
            assert all(d.total_bytes >= d.free_bytes >= 0 for d in devices)
        case _:
            pytest.fail(f"probe_gpu returned something outside GpuProbe: {probe!r}")


def test_init_failure_is_nvml_unavailable_without_shutdown() -> None:
    """A library or driver failure at init yields NvmlUnavailable naming the call and error."""
    nvml = FakeNvml(init_error="Driver Not Loaded")
    assert probe_gpu(nvml) == NvmlUnavailable(
        reason="nvmlInit failed: Driver Not Loaded (FakeNVMLError)"
    )
    assert nvml.calls == ["init"]


def test_count_failure_is_nvml_unavailable_and_shuts_down() -> None:
    """A failing device count is reported as NVML unavailable, and NVML is shut down."""
    nvml = FakeNvml(count_error="Insufficient Permissions")
    assert probe_gpu(nvml) == NvmlUnavailable(
        reason="nvmlDeviceGetCount failed: Insufficient Permissions (FakeNVMLError)"
    )
    assert nvml.calls == ["init", "shutdown"]


def test_zero_devices_is_no_gpu() -> None:
    """NVML working with no device is NoGpu, distinct from NVML being unavailable."""
    nvml = FakeNvml()
    assert probe_gpu(nvml) == NoGpu(reason="NVML initialised and reported 0 devices")
    assert nvml.calls == ["init", "shutdown"]


def test_devices_are_read_with_their_memory() -> None:
    """Each device comes back with index, name (bytes decoded) and memory figures."""
    nvml = FakeNvml(
        devices=[
            FakeDevice("NVIDIA GeForce RTX 4090", Memory(24 * GIB, 2 * GIB, 22 * GIB)),
            FakeDevice(b"NVIDIA RTX A4000", Memory(16 * GIB, 0, 16 * GIB)),
        ]
    )
    probe = probe_gpu(nvml)
    assert probe == GpuAvailable(
        devices=(
            GpuMemory(
                index=0,
                name="NVIDIA GeForce RTX 4090",
                total_bytes=24 * GIB,
                used_bytes=2 * GIB,
                free_bytes=22 * GIB,
            ),
            GpuMemory(
                index=1,
                name="NVIDIA RTX A4000",
                total_bytes=16 * GIB,
                used_bytes=0,
                free_bytes=16 * GIB,
            ),
        )
    )
    assert isinstance(probe, GpuAvailable)
    assert (probe.total_bytes, probe.free_bytes) == (40 * GIB, 38 * GIB)


def test_a_device_that_fails_is_reported_not_skipped() -> None:
    """A device whose handle or memory query fails is listed in failed; the others are read."""
    nvml = FakeNvml(
        devices=[
            FakeDevice("GPU A", None),
            FakeDevice("GPU B", Memory(8 * GIB, GIB, 7 * GIB)),
            FakeDevice("GPU C", Memory(8 * GIB, 0, 8 * GIB), handle_fails=True),
        ]
    )
    probe = probe_gpu(nvml)
    assert isinstance(probe, GpuAvailable)
    assert [d.index for d in probe.devices] == [1]
    assert probe.failed == (
        GpuDeviceError(
            index=0,
            call="nvmlDeviceGetMemoryInfo",
            reason="nvmlDeviceGetMemoryInfo failed: Not Supported (FakeNVMLError)",
        ),
        GpuDeviceError(
            index=2,
            call="nvmlDeviceGetHandleByIndex",
            reason="nvmlDeviceGetHandleByIndex failed: GPU is lost (FakeNVMLError)",
        ),
    )
    assert nvml.calls == ["init", "shutdown"]


def test_other_errors_propagate_after_shutdown() -> None:
    """An error that is not NVML's is not turned into a probe result; NVML is still shut down."""

    class Broken(FakeNvml):
        def nvmlDeviceGetName(self, handle: FakeDevice) -> str | bytes:
            raise RuntimeError("bug in the binding")

    nvml = Broken(devices=[FakeDevice("GPU", Memory(GIB, 0, GIB))])
    with pytest.raises(RuntimeError, match=r"^bug in the binding$"):
        probe_gpu(nvml)
    assert nvml.calls == ["init", "shutdown"]


def test_hardware_profile_describes_each_case() -> None:
    """HardwareProfile.detect probes and describe() says what was found, or why nothing was."""
    gpus = HardwareProfile.detect(
        FakeNvml(devices=[FakeDevice("RTX", Memory(24 * GIB, 0, 24 * GIB)), FakeDevice("X", None)])
    )
    assert gpus.describe() == (
        "RTX #0: 24.0 GiB; device #1 unreadable "
        "(nvmlDeviceGetMemoryInfo failed: Not Supported (FakeNVMLError))"
    )
    assert HardwareProfile.detect(FakeNvml()).describe() == (
        "no GPU (NVML initialised and reported 0 devices)"
    )
    assert HardwareProfile.detect(FakeNvml(init_error="boom")).describe() == (
        "NVML unavailable (nvmlInit failed: boom (FakeNVMLError))"
    )
