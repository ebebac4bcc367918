"""AMD and Apple power behind the probe seam: amdsmi (through a fake module), rocm-smi (through its JSON), and the
Apple probe's reason.

`rocm-smi-power-mi250-x2.json` is composed, not recorded on a card: rocm-smi's own key names (`showPower`,
`showEnergy` in rocm_smi.py: "Average Graphics Package Power (W)", the newer "Current Socket Graphics Package
Power (W)", "Accumulated Energy (uJ)") with the values of an MI250 run published in a public repository.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from farm.errors import ProfileError
from farm.hardware.amd import ROCM_SMI_POWER, AmdProbe
from farm.hardware.apple import AppleProbe
from farm.hardware.probe import PowerReading

PROBES = Path(__file__).resolve().parents[1] / "fixtures" / "probes"
ROCM_POWER = (PROBES / "rocm-smi-power-mi250-x2.json").read_text()


class FakeAmdSmi:
    """The amdsmi calls the power path makes. `old_keys`: ROCm 6.0's `power` for the accumulator."""

    def __init__(self, *, old_keys: bool = False, fail_init: bool = False) -> None:
        self.old_keys = old_keys
        self.fail_init = fail_init
        self.inits = 0

    def amdsmi_init(self) -> None:
        self.inits += 1
        if self.fail_init:
            raise RuntimeError("libamd_smi.so: cannot open shared object file")

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu0", "gpu1", "gpu2"]

    def amdsmi_get_energy_count(self, handle: str) -> dict[str, Any]:
        ticks = {"gpu0": 1_000_000, "gpu1": 2_000_000, "gpu2": 3_000_000}[handle]
        key = "power" if self.old_keys else "energy_accumulator"
        return {key: ticks, "counter_resolution": 15.3, "timestamp": 0}

    def amdsmi_get_power_info(self, handle: str) -> dict[str, Any]:
        if handle == "gpu1":
            return {"socket_power": "N/A", "current_socket_power": 750, "average_socket_power": "N/A"}
        return {"socket_power": 300, "average_socket_power": "N/A"}


def no_tool(argv: Sequence[str]) -> str:
    raise ProfileError(f"{argv[0]} is not installed on this host", field="hardware.source")


@pytest.mark.parametrize("old_keys", [False, True], ids=["energy_accumulator", "power-key-before-rocm-6.1"])
def test_amdsmi_energy_is_ticks_times_resolution(old_keys: bool) -> None:
    """amdsmi's accumulator times its resolution (µJ) is the counter in mJ: 1e6 x 15.3 µJ = 15,300 mJ; power in W
    from socket_power, else current_socket_power ('N/A' skipped)."""
    fake = FakeAmdSmi(old_keys=old_keys)
    snapshot = AmdProbe(no_tool, amdsmi=fake).power()
    assert snapshot.source == "amdsmi"
    assert snapshot.cards == (
        PowerReading(energy_mj=15_300.0, power_mw=300_000.0),
        PowerReading(energy_mj=30_600.0, power_mw=750_000.0),
        PowerReading(energy_mj=45_900.0, power_mw=300_000.0),
    )


def test_amdsmi_answers_for_the_restricted_cards_only_and_initialises_once() -> None:
    """restrict_to picks the cards by index, in that order; amdsmi is initialised once for every reading."""
    fake = FakeAmdSmi()
    probe = AmdProbe(no_tool, restrict_to=(2, 0), amdsmi=fake)
    probe.power()
    snapshot = probe.power()
    assert [card.energy_mj for card in snapshot.cards] == [45_900.0, 15_300.0]
    assert fake.inits == 1


def test_rocm_smi_power_when_amdsmi_does_not_load() -> None:
    """amdsmi failing to start: rocm-smi's JSON, µJ to mJ and W to mW, the newer power key too."""
    calls: list[tuple[str, ...]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(tuple(argv))
        return ROCM_POWER

    snapshot = AmdProbe(run, amdsmi=FakeAmdSmi(fail_init=True)).power()
    assert calls == [ROCM_SMI_POWER]
    assert snapshot.source == "rocm-smi"
    assert snapshot.cards[0].energy_mj == pytest.approx(962825096297.4429)
    assert snapshot.cards[0].power_mw == pytest.approx(91_000.0)
    assert snapshot.cards[1].power_mw == pytest.approx(88_000.0)
    assert snapshot.cards[1].energy_mj == pytest.approx(962825094767.4429)


def test_no_amd_tool_at_all_says_why() -> None:
    """Neither amdsmi nor rocm-smi: no cards, and the reason names rocm-smi."""
    snapshot = AmdProbe(no_tool, use_amdsmi=False).power()
    assert snapshot.cards == ()
    assert snapshot.unavailable is not None
    assert "rocm-smi is not installed" in snapshot.unavailable


def test_apple_power_is_absent_with_the_reason() -> None:
    """powermetrics needs root: the Apple probe reads no power and says so."""
    snapshot = AppleProbe(no_tool).power()
    assert snapshot.cards == ()
    assert snapshot.unavailable is not None
    assert "powermetrics" in snapshot.unavailable
    assert "root" in snapshot.unavailable
