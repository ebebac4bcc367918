"""The hardware catalogue is the registry's documents plus the farm's names, and the AMD and Apple probes match
real tool output to it (through fakes of rocm-smi, sysctl and system_profiler)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from farm import hardware
from farm.cli.app import app
from farm.errors import ProfileError
from farm.hardware.amd import AmdProbe
from farm.hardware.apple import AppleProbe
from farm.hardware.detect import probe_from_source

PROBES = Path(__file__).resolve().parents[1] / "fixtures" / "probes"
ROCM_7900 = (PROBES / "rocm-smi-7900xtx-x2.json").read_text()
ROCM_MI300 = (PROBES / "rocm-smi-mi300x.json").read_text()
PROFILER_M3 = (PROBES / "system_profiler-m3-max.json").read_text()


def _registry_rows() -> list[dict[str, object]]:
    text = resources.files("farm.hardware").joinpath("registry.json").read_text(encoding="utf-8")
    rows: list[dict[str, object]] = json.loads(text)["hardware"]
    return rows


def _runner(outputs: dict[tuple[str, ...], str]) -> tuple[list[tuple[str, ...]], object]:
    calls: list[tuple[str, ...]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(tuple(argv))
        if tuple(argv) not in outputs:
            raise ProfileError(f"{argv[0]} is not installed on this host", field="hardware.source")
        return outputs[tuple(argv)]

    return calls, run


def test_every_registry_document_is_in_the_catalogue() -> None:
    """All 61 of the registry's hardware ids are known, each with its vendor, memory and backend."""
    rows = _registry_rows()
    assert len(rows) == len({row["id"] for row in rows}) == 61
    catalogue = hardware.catalogue()
    for row in rows:
        kind = catalogue[str(row["id"])]
        assert kind.vendor == row["vendor"]
        assert kind.memory_gib == int(row["memory"]["vram_gb"])  # type: ignore[index]
        assert kind.accelerator_backend in ("nvidia", "amd-rocm", "amd-npu", "intel-xpu", "metal")
        assert kind.source in ("registry", "both")


def test_farm_ids_and_names_survive_the_merge() -> None:
    """The ids the farm had before (h200-141gb, cpu) stay, and NVML names still find their ids."""
    assert hardware.is_known("h200-141gb")
    assert hardware.is_known("cpu")
    assert hardware.id_for_nvml_name("NVIDIA H200") == "h200-141gb"
    assert hardware.id_for_nvml_name("NVIDIA RTX PRO 6000 Blackwell Server Edition") == "rtx-pro-6000-blackwell-96gb"
    assert hardware.id_for_nvml_name("NVIDIA GeForce RTX 3080 Ti") == "rtx-3080-ti-12gb"
    assert hardware.id_for_nvml_name("NVIDIA GeForce RTX 3090") == "rtx-3090-24gb"
    assert hardware.id_for_nvml_name("NVIDIA H20") is None


def test_page_labels_reach_registry_ids() -> None:
    """LocalMaxxing hardware labels map to the registry's ids."""
    assert hardware.id_for_label("RTX 3090") == "rtx-3090-24gb"
    assert hardware.id_for_label("RX 7700 XT") == "rx-7700-xt-12gb"
    assert hardware.id_for_label("RTX PRO 6000 Blackwell") == "rtx-pro-6000-blackwell-96gb"


def test_amd_probe_reads_rocm_smi() -> None:
    """Two RX 7900 XTX cards in rocm-smi's JSON are two rx-7900-xtx-24gb, with memory, ids and the driver."""
    calls, run = _runner(
        {
            (
                "rocm-smi",
                "--showproductname",
                "--showmeminfo",
                "vram",
                "--showuniqueid",
                "--showdriverversion",
                "--json",
            ): ROCM_7900,
            ("rocm-smi", "--showmeminfo", "vram", "--json"): ROCM_7900,
        }
    )
    probe = AmdProbe(run)  # type: ignore[arg-type]
    report = probe.report()
    assert (report.hardware_id, report.count, report.declared) == ("rx-7900-xtx-24gb", 2, False)
    assert [gpu.memory_total_mib for gpu in report.gpus] == [25753026560 // 2**20] * 2
    assert report.gpus[1].uuid == "0x8e2f4a1b3c5d7f90"
    assert report.driver_version == "6.10.5"
    assert probe.memory_used_mib() == (1247285248 // 2**20, 20971520 // 2**20)
    assert calls[0][0] == "rocm-smi"


def test_amd_probe_restricted_to_one_card() -> None:
    """restrict_to picks cards by index; a missing index is refused."""
    _, run = _runner(
        {
            (
                "rocm-smi",
                "--showproductname",
                "--showmeminfo",
                "vram",
                "--showuniqueid",
                "--showdriverversion",
                "--json",
            ): ROCM_7900
        }
    )
    assert AmdProbe(run, restrict_to=(1,)).report().count == 1  # type: ignore[arg-type]
    with pytest.raises(ProfileError, match="index 4"):
        AmdProbe(run, restrict_to=(4,)).report()  # type: ignore[arg-type]


def test_unknown_amd_device_is_refused() -> None:
    """An MI300X (not in the registry's catalogue) is a ProfileError naming the card."""
    _, run = _runner(
        {
            (
                "rocm-smi",
                "--showproductname",
                "--showmeminfo",
                "vram",
                "--showuniqueid",
                "--showdriverversion",
                "--json",
            ): ROCM_MI300
        }
    )
    with pytest.raises(ProfileError, match="'AMD Instinct MI300X OAM' is not in the hardware catalogue"):
        AmdProbe(run).report()  # type: ignore[arg-type]


def test_amd_probe_without_cards_reports_the_cpu() -> None:
    """rocm-smi with no card object: the host has no AMD GPU the farm can use."""
    _, run = _runner(
        {
            (
                "rocm-smi",
                "--showproductname",
                "--showmeminfo",
                "vram",
                "--showuniqueid",
                "--showdriverversion",
                "--json",
            ): '{"system": {}}'
        }
    )
    report = AmdProbe(run).report()  # type: ignore[arg-type]
    assert (report.hardware_id, report.extra["amd"]) == ("cpu", "rocm-smi sees no GPU")


def _apple(chip: str, memsize: str, profiler: str = PROFILER_M3) -> AppleProbe:
    _, run = _runner(
        {
            ("sysctl", "-n", "machdep.cpu.brand_string"): chip + "\n",
            ("sysctl", "-n", "hw.memsize"): memsize + "\n",
            ("system_profiler", "SPDisplaysDataType", "-json"): profiler,
        }
    )
    return AppleProbe(run)  # type: ignore[arg-type]


def test_apple_probe_reads_sysctl_and_system_profiler() -> None:
    """An M3 Max with 64 GB is apple-m3-max-64gb, one device, with its 40 GPU cores."""
    report = _apple("Apple M3 Max", "68719476736").report()
    assert (report.hardware_id, report.count) == ("apple-m3-max-64gb", 1)
    assert report.gpus[0].name == "Apple M3 Max"
    assert report.extra == {"backend": "metal", "gpu_cores": "40"}


@pytest.mark.parametrize(
    ("chip", "memsize", "phrase"),
    [
        ("Apple M3 Max", "206158430208", "Apple M3 Max with 192 GB is not in the hardware catalogue"),
        ("Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", "17179869184", "not Apple silicon"),
        ("Apple M3 Max", "lots", "not a byte count"),
        ("Apple M4 Max", "38654705664", "lists Apple M3 Max, not the Apple M4 Max GPU"),
    ],
)
def test_apple_probe_refusals(chip: str, memsize: str, phrase: str) -> None:
    """Unknown chips and memory sizes, Intel Macs and a GPU that is not the chip are clear refusals."""
    with pytest.raises(ProfileError, match=phrase):
        _apple(chip, memsize).report()


def test_probe_sources() -> None:
    """The seam builds each probe by its profile name; an unknown name is refused."""
    assert isinstance(probe_from_source("amd"), AmdProbe)
    assert isinstance(probe_from_source("apple"), AppleProbe)
    with pytest.raises(ProfileError, match="unknown hardware source 'tpu'"):
        probe_from_source("tpu")


def test_catalogue_command_lists_every_id() -> None:
    """`farm catalogue --json` lists the registry's 61 ids and the farm's own."""
    result = CliRunner().invoke(app, ["catalogue", "--json"])
    assert result.exit_code == 0, result.output
    listed = {row["id"]: row for row in json.loads(result.output)}
    assert {str(row["id"]) for row in _registry_rows()} <= set(listed)
    assert listed["xdna2-krackan-16gb"]["accelerator_backend"] == "amd-npu"
    table = CliRunner().invoke(app, ["catalogue", "--vendor", "apple"])
    assert "apple-m5-ultra-256gb" in table.output
    assert "rtx-3090-24gb" not in table.output


@pytest.mark.parametrize(
    ("nvml_name", "expected"),
    [
        ("NVIDIA GeForce RTX 4070 Ti", "rtx-4070-ti-12gb"),
        ("NVIDIA GeForce RTX 4070", "rtx-4070-12gb"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "rtx-4070-ti-super-16gb"),
        ("NVIDIA GeForce RTX 3060 Ti", "rtx-3060-ti-8gb"),
        ("NVIDIA GeForce RTX 4090 D", None),
    ],
)
def test_a_variant_word_after_a_card_name_is_another_card(nvml_name: str, expected: str | None) -> None:
    """A catalogue name matches NVML's name only whole and not followed by a variant word: "RTX 4070" named the
    RTX 4070 Ti (12 GB, another card) before; an RTX 4090 D, which the catalogue lacks, is unknown, not an RTX
    4090."""
    assert hardware.id_for_nvml_name(nvml_name) == expected
    assert hardware.id_for_label(nvml_name.removeprefix("NVIDIA GeForce ")) == expected
