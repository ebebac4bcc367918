"""Energy figures through an NVML fake whose energy counter and power are known at every instant.

The worker's path, less the thread: `NvmlProbe.power()` over a fake pynvml module, the `EnergySampler` stepped
on a fake clock every 100 ms, then `energy_figures` over request samples whose windows are chosen by hand.
Card 0 has the total-energy counter (100 W until t = 10 s, 400 W after; the driver reloads at t = 14 s, so the
counter restarts from 0); card 1 has no counter (NOT_SUPPORTED) and draws a flat 250 W, so its power samples
are integrated. Sampling stops between 16 s and 19.5 s: a 3.5 s gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from farm.bench.energy import SOURCE_COUNTER, SOURCE_POWER, Prices
from farm.bench.energy_figures import energy_figures
from farm.hardware.nvml import NvmlProbe
from farm.hardware.probe import DeclaredProbe, HardwareReport
from farm.worker.energy import EnergySampler

S = 1_000_000_000


class FakeNVMLError(Exception):
    """pynvml.NVMLError."""


@dataclass
class Clock:
    """The fake time, in ns."""

    now_ns: int = 0

    def __call__(self) -> int:
        return self.now_ns


def card0_energy_mj(t_ns: int) -> float:
    """The counter of card 0: 100 W to 10 s, 400 W after; reset to 0 at 14 s (then 400 W from 0)."""
    t = t_ns / S
    if t >= 14:
        return 400_000 * (t - 14)
    if t <= 10:
        return 100_000 * t
    return 1_000_000 + 400_000 * (t - 10)


class FakePynvml:
    """The NVML calls the power path makes, over two cards on the fake clock."""

    NVMLError = FakeNVMLError

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def nvmlInit(self) -> None:
        return None

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, card: int) -> int:
        if card == 1:
            raise FakeNVMLError("Not Supported")
        return round(card0_energy_mj(self.clock.now_ns))

    def nvmlDeviceGetPowerUsage(self, card: int) -> int:
        if card == 1:
            return 250_000
        return 100_000 if self.clock.now_ns < 10 * S else 400_000


def request(start_s: float, end_s: float, output: int, prompt: int) -> dict[str, Any]:
    return {
        "started_ns": round(start_s * S),
        "first_token_ns": round(start_s * S) + 1,
        "last_token_ns": round(end_s * S),
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "error": None,
    }


@pytest.fixture
def series() -> Any:
    """Both cards read every 100 ms from 0 to 22 s, except from 16 s to 19.5 s."""
    clock = Clock()
    probe = NvmlProbe(FakePynvml(clock))
    sampler = EnergySampler(probe.power, clock=clock)
    for tenth in range(0, 221):
        if 160 < tenth < 195:
            continue
        clock.now_ns = tenth * S // 10
        sampler.sample()
    assert sampler.source == "nvml"
    assert sampler.errors == 0
    return sampler.series


def test_nvml_power_reads_counter_and_power_per_card() -> None:
    """A card without the counter reports None for it (NOT_SUPPORTED), and its power still."""
    clock = Clock(now_ns=2 * S)
    snapshot = NvmlProbe(FakePynvml(clock)).power()
    assert snapshot.source == "nvml"
    assert [(c.energy_mj, c.power_mw) for c in snapshot.cards] == [(200_000.0, 100_000.0), (None, 250_000.0)]


def test_energy_is_exact_through_the_counter_and_the_power_samples(series: Any) -> None:
    """Windows [2.05, 5.55] and [8.05, 12.05]: card 0 by its counter, card 1 by its samples, both exact.

    Repeat 1: card 0 100 W x 3.5 s = 350 J, card 1 250 W x 3.5 s = 875 J: 1225 J, 500 output tokens → 2.45 J/tok,
    600 tokens in all → 2.041 J/tok. Repeat 2 crosses the step at 10 s: card 0 100 x 1.95 + 400 x 2.05 = 1015 J,
    card 1 250 x 4 = 1000 J: 2015 J → 4.03 J/tok."""
    samples = {
        "decode/code": [
            [request(2.05, 3.0, 100, 50), request(3.0, 5.55, 400, 50)],
            [request(8.05, 9.0, 100, 50), request(9.0, 12.05, 400, 50)],
        ]
    }
    outcome = energy_figures(samples, series, source="nvml", prices=Prices(cost_per_hour=3.6), sampled_every_s=0.1)
    figures = {f.key: f for f in outcome.figures}
    assert outcome.absent == {}
    assert figures["energy/decode.code/energy_j"].values == pytest.approx((1225.0, 2015.0), rel=1e-9)
    assert figures["energy/decode.code/j_per_output_token"].values == pytest.approx((2.45, 4.03), rel=1e-9)
    assert figures["energy/decode.code/j_per_total_token"].values == pytest.approx((1225 / 600, 2015 / 600), rel=1e-9)
    assert figures["energy/decode.code/output_tokens_per_j"].values == pytest.approx((500 / 1225, 500 / 2015))
    assert figures["energy/decode.code/avg_power_w"].values == pytest.approx((350.0, 2015 / 4), rel=1e-9)
    assert figures["power/decode.code.gpu0/avg_power_w"].values == pytest.approx((100.0, 1015 / 4), rel=1e-9)
    assert figures["power/decode.code.gpu0/peak_power_w"].values == pytest.approx((100.0, 400.0))
    assert figures["power/decode.code.gpu1/avg_power_w"].values == pytest.approx((250.0, 250.0))
    # $3.60 an hour over 3.5 s and 4 s, per 500 output tokens, per million: $7 and $8.
    assert figures["cost/decode.code/per_m_output_tokens"].values == pytest.approx((7.0, 8.0), rel=1e-9)
    cost = figures["cost/decode.code/per_m_output_tokens"]
    assert cost.unit == "USD/Mtok"
    assert cost.params["prices"] == {"cost_per_hour": 3.6, "electricity_per_kwh": None, "currency": "USD"}
    energy = figures["energy/decode.code/energy_j"]
    assert energy.params["gpu_only"] is True
    assert energy.params["read_by"] == sorted({SOURCE_COUNTER, SOURCE_POWER})
    assert energy.summary.n == 2
    assert energy.requested_repeats == 2


def test_a_counter_reset_and_a_gap_leave_the_figures_absent_with_the_reason(series: Any) -> None:
    """Repeat 1 spans the reset at 14 s, repeat 2 the gap from 16 s to 19.5 s: no figure, each reason kept; a
    third repeat, clean, keeps its value and the others' reasons in `absent_in`."""
    both_bad = {"concurrency/4": [[request(13.05, 15.05, 100, 10)], [request(15.55, 20.05, 100, 10)]]}
    outcome = energy_figures(both_bad, series, source="nvml")
    assert outcome.figures == ()
    reason = outcome.absent["energy/concurrency.4/energy_j"]
    assert "gpu0: the energy counter went backwards" in reason
    assert "a gap of 3.50 s in the telemetry (over 3 s)" in reason

    one_good = {"concurrency/4": [*both_bad["concurrency/4"], [request(20.15, 21.85, 340, 10)]]}
    outcome = energy_figures(one_good, series, source="nvml")
    figure = next(f for f in outcome.figures if f.key == "energy/concurrency.4/energy_j")
    # 20.15 to 21.85 s: card 0 400 W and card 1 250 W x 1.7 s = 1105 J.
    assert figure.values == pytest.approx((1105.0,), rel=1e-9)
    assert figure.requested_repeats == 3
    assert set(figure.params["absent_in"]) == {"repeat 1", "repeat 2"}


def test_a_probe_that_sees_no_power_makes_the_figures_absent_with_its_reason() -> None:
    """A declared host: each measurement's energy is absent, saying the probe cannot read power."""
    clock = Clock()
    sampler = EnergySampler(DeclaredProbe(HardwareReport(hardware_id="cpu", count=1)).power, clock=clock)
    sampler.sample()
    outcome = energy_figures(
        {"decode/code": [[request(0, 1, 10, 1)]], "spec_decode/code": [[request(0, 1, 10, 1)]]},
        sampler.series,
        source=sampler.source,
        unavailable=sampler.unavailable,
    )
    assert outcome.figures == ()
    assert list(outcome.absent) == ["energy/decode.code/energy_j"]  # spec decode shares decode's windows
    assert "declared hardware" in outcome.absent["energy/decode.code/energy_j"]


def test_a_read_that_fails_is_counted_and_leaves_a_gap() -> None:
    """A probe that raises: the sampler counts the error and keeps going; nothing is recorded for that read."""
    calls = {"n": 0}

    def flaky() -> Any:
        calls["n"] += 1
        raise OSError("tool died")

    sampler = EnergySampler(flaky, clock=Clock())
    sampler.sample()
    assert sampler.errors == 1
    assert sampler.series == ()
    assert sampler.unavailable is not None
    assert "tool died" in sampler.unavailable
