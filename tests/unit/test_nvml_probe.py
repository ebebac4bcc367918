"""The NVML probe through a fake pynvml module: names to hardware ids, details, restriction, no-GPU hosts."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from farm import hardware
from farm.errors import ProfileError
from farm.hardware.nvml import NvmlProbe, cuda_version_text

MIB = 1024 * 1024


class FakeNVMLError(Exception):
    """pynvml.NVMLError."""


@dataclass
class FakeCard:
    """One GPU as the fake NVML reports it."""

    name: str | bytes
    uuid: str
    total_mib: int = 97887
    used_mib: int = 500
    power_limit_mw: int | None = 600_000
    nvlinks: int = 0
    pcie: tuple[int, int] = (5, 16)
    pids: tuple[int, ...] = ()


@dataclass
class FakePynvml:
    """A stand-in for the pynvml module: the functions the probe calls, over a list of cards."""

    cards: list[FakeCard]
    init_error: bool = False
    driver: str | bytes = "590.48.01"
    cuda: int = 13010
    calls: list[str] = field(default_factory=list)
    NVMLError: type[Exception] = FakeNVMLError
    NVML_FEATURE_ENABLED: int = 1
    NVML_NVLINK_MAX_LINKS: int = 18

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error:
            raise FakeNVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeCard:
        return self.cards[index]

    def nvmlDeviceGetName(self, card: FakeCard) -> str | bytes:
        return card.name

    def nvmlDeviceGetUUID(self, card: FakeCard) -> str:
        return card.uuid

    def nvmlDeviceGetMemoryInfo(self, card: FakeCard) -> Any:
        return SimpleNamespace(total=card.total_mib * MIB, used=card.used_mib * MIB, free=0)

    def nvmlDeviceGetPowerManagementLimit(self, card: FakeCard) -> int:
        if card.power_limit_mw is None:
            raise FakeNVMLError("Not Supported")
        return card.power_limit_mw

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetNvLinkState(self, card: FakeCard, link: int) -> int:
        if card.nvlinks == 0:
            raise FakeNVMLError("Not Supported")
        return 1 if link < card.nvlinks else 0

    def nvmlDeviceGetMaxPcieLinkGeneration(self, card: FakeCard) -> int:
        return card.pcie[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, card: FakeCard) -> int:
        return card.pcie[1]

    def nvmlDeviceGetComputeRunningProcesses(self, card: FakeCard) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=0) for pid in card.pids]


def seed_host() -> FakePynvml:
    """The seed's host: two RTX PRO 6000 Blackwell over PCIe Gen5, 600 W each."""
    name = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    return FakePynvml([FakeCard(name, "GPU-aaaa"), FakeCard(name, "GPU-bbbb", used_mib=96799, pids=(77,))])


@pytest.mark.parametrize(
    ("nvml_name", "hardware_id"),
    [
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-blackwell-96gb"),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx-pro-6000-blackwell-96gb"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell-96gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("NVIDIA H100 PCIe", "h100-pcie-80gb"),
        ("NVIDIA H200", "h200-141gb"),
        ("NVIDIA H200 NVL", "h200-141gb"),
        ("NVIDIA B200", "b200-180gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),
        ("NVIDIA L40S", "l40s-48gb"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090-24gb"),
        ("NVIDIA GeForce RTX 5090", "rtx-5090-32gb"),
        ("NVIDIA GB200", None),
        ("NVIDIA H20", None),
        ("NVIDIA A100-SXM4-40GB", None),
        ("NVIDIA L40", None),
        ("NVIDIA H100 NVL", None),
        ("Tesla T4", None),
    ],
)
def test_nvml_name_to_hardware_id(nvml_name: str, hardware_id: str | None) -> None:
    """Names as NVML reports them map to the catalogue's ids; look-alikes of another size map to none."""
    assert hardware.id_for_nvml_name(nvml_name) == hardware_id


@pytest.mark.parametrize(
    ("nvml_name", "hardware_id"),
    [
        ("NVIDIA H200", "h200-141gb"),
        (b"NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090-24gb"),
    ],
)
def test_report_hardware_id_through_the_probe(nvml_name: str | bytes, hardware_id: str) -> None:
    """The probe reads names (bytes in old bindings) and reports the catalogue id and count."""
    probe = NvmlProbe(FakePynvml([FakeCard(nvml_name, "GPU-1")]))
    report = probe.report()
    assert (report.hardware_id, report.count, report.declared) == (hardware_id, 1, False)


def test_report_of_the_seed_host() -> None:
    """Every provenance detail: names, UUIDs, memory, power limit, driver, CUDA version, PCIe link."""
    report = NvmlProbe(seed_host()).report()
    assert report.hardware_id == "rtx-pro-6000-blackwell-96gb"
    assert report.count == 2
    assert [g.uuid for g in report.gpus] == ["GPU-aaaa", "GPU-bbbb"]
    assert [g.index for g in report.gpus] == [0, 1]
    assert report.gpus[0].memory_total_mib == 97887
    assert report.gpus[0].power_limit_w == 600.0
    assert report.driver_version == "590.48.01"
    assert report.cuda_version == "13.1"
    assert report.interconnect == "PCIe Gen5 x16"


def test_nvlink_when_links_are_active() -> None:
    """Active NVLink links are reported instead of the PCIe link."""
    cards = [FakeCard("NVIDIA H100 80GB HBM3", f"GPU-{i}", nvlinks=18) for i in range(2)]
    assert NvmlProbe(FakePynvml(cards)).report().interconnect == "NVLink (36 active links over 2 GPUs)"


def test_unsupported_details_are_none() -> None:
    """A card without a power limit reading reports None, not an error."""
    report = NvmlProbe(FakePynvml([FakeCard("NVIDIA L40S", "GPU-1", power_limit_mw=None)])).report()
    assert report.gpus[0].power_limit_w is None


def test_memory_and_processes() -> None:
    """Memory in use per card (MiB) and the compute processes on the cards."""
    probe = NvmlProbe(seed_host())
    assert probe.memory_used_mib() == (500, 96799)
    assert probe.compute_processes() == (77,)


@pytest.mark.parametrize(
    ("restrict_to", "uuids"), [((1,), ["GPU-bbbb"]), (("GPU-bbbb", "0"), ["GPU-bbbb", "GPU-aaaa"])]
)
def test_restrict_to(restrict_to: tuple[int | str, ...], uuids: list[str]) -> None:
    """restrict_to (indices or UUIDs) limits the report, memory and processes to those cards, in that order."""
    probe = NvmlProbe(seed_host(), restrict_to=restrict_to)
    report = probe.report()
    assert [g.uuid for g in report.gpus] == uuids
    assert report.count == len(uuids)
    assert len(probe.memory_used_mib()) == len(uuids)
    assert probe.compute_processes() == (77,)


def test_restrict_to_the_idle_card_sees_no_process() -> None:
    """Processes on a card outside restrict_to are not this worker's business."""
    assert NvmlProbe(seed_host(), restrict_to=(0,)).compute_processes() == ()


@pytest.mark.parametrize(("restrict_to", "why"), [((5,), "index 5 does not exist"), (("GPU-zzz",), "no GPU with UUID")])
def test_restrict_to_unknown_cards(restrict_to: tuple[int | str, ...], why: str) -> None:
    """A restriction naming a card the host lacks is a profile error."""
    with pytest.raises(ProfileError, match=why):
        NvmlProbe(seed_host(), restrict_to=restrict_to).report()


def test_unknown_gpu_name_is_a_profile_error() -> None:
    """A GPU the catalogue lacks is named in the error, with where to add it."""
    with pytest.raises(ProfileError, match=r"'Tesla T4'.*catalogue\.toml"):
        NvmlProbe(FakePynvml([FakeCard("Tesla T4", "GPU-1")])).report()


def test_mixed_kinds_need_restrict_to() -> None:
    """A host with two kinds of card must choose one with restrict_to."""
    cards = [FakeCard("NVIDIA L40S", "GPU-1"), FakeCard("NVIDIA GeForce RTX 4090", "GPU-2")]
    with pytest.raises(ProfileError, match="mixes GPU kinds"):
        NvmlProbe(FakePynvml(cards)).report()
    assert NvmlProbe(FakePynvml(cards), restrict_to=(1,)).report().hardware_id == "rtx-4090-24gb"


@pytest.mark.parametrize("fake", [FakePynvml([], init_error=True), FakePynvml([])], ids=["no-driver", "no-device"])
def test_no_gpu_is_a_cpu_host(fake: FakePynvml) -> None:
    """No driver or no device: hardware id 'cpu', count 1, the reason kept; memory and processes are blind."""
    probe = NvmlProbe(fake)
    report = probe.report()
    assert (report.hardware_id, report.count, report.gpus) == ("cpu", 1, ())
    assert report.extra["nvml"]
    assert probe.memory_used_mib() == ()
    assert probe.compute_processes() == ()


def test_missing_module_is_a_profile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without nvidia-ml-py installed, asking for NVML says what to install."""
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(ProfileError, match="nvidia-ml-py"):
        NvmlProbe()


def test_close_shuts_nvml_down_once() -> None:
    """NVML is started on first use and shut down by close, once."""
    fake = seed_host()
    with NvmlProbe(fake) as probe:
        probe.report()
        probe.memory_used_mib()
    probe.close()
    assert fake.calls == ["init", "shutdown"]


@pytest.mark.parametrize(("raw", "text"), [(12080, "12.8"), (13010, "13.1"), (11040, "11.4")])
def test_cuda_version_text(raw: int, text: str) -> None:
    """NVML's integer CUDA driver version as major.minor."""
    assert cuda_version_text(raw) == text
