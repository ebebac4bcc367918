"""The simulator's power model and its exact energy meter: hand-computed tables, and its scheduler's counts."""

from __future__ import annotations

import pytest

from farm.sim.power import EnergyMeter, card_power_w
from farm.sim.profile import SimProfileError, load_profile

S = 1_000_000_000
SEED = {"idle_w": 95.0, "prefill_w": 600.0, "decode_w": 330.0, "per_stream_w": 4.5, "limit_w": 600.0}


@pytest.mark.parametrize(
    ("prefilling", "decoding", "watts"),
    [
        (0, 0, 95.0),  # idle
        (1, 0, 600.0),  # a prefill runs at the limit
        (0, 1, 330.0),  # one stream decoding
        (0, 16, 330.0 + 4.5 * 15),  # 397.5 W
        (0, 64, 600.0),  # 330 + 4.5 x 63 = 613.5, capped at the 600 W limit
        (2, 4, 600.0),  # prefill beside decode: the higher of the two
    ],
)
def test_seed_card_power(prefilling: int, decoding: int, watts: float) -> None:
    """The seed's cards: idle 95 W, prefill 600 W, 330 W for one stream and 4.5 W per further stream, 600 W limit."""
    assert card_power_w(**SEED, prefilling=prefilling, decoding=decoding) == pytest.approx(watts)


def test_meter_integrates_a_piecewise_constant_power_exactly() -> None:
    """100 W for 2 s, 300 W for 1 s, 50 W after: 200 J, then 500 J at 3 s, 550 J at 4 s; any interval between."""
    meter = EnergyMeter(100.0, start_ns=10 * S)
    meter.set_power(12 * S, 300.0)
    meter.set_power(13 * S, 50.0)
    meter.set_power(13 * S + 1, 50.0)  # no change: no new point
    assert meter.energy_j(14 * S) == pytest.approx(550.0)
    assert meter.energy_between(10 * S, 13 * S) == pytest.approx(500.0)
    assert meter.energy_between(11 * S, 12 * S + S // 2) == pytest.approx(100.0 + 150.0)
    assert meter.energy_between(12 * S + S // 2, 14 * S) == pytest.approx(150.0 + 50.0)
    assert meter.energy_between(9 * S, 11 * S) is None  # before the meter started


def test_profiles_model_power_and_refuse_a_limit_below_idle() -> None:
    """The seed and test profiles carry a power model; a limit below idle names the fields."""
    seed = load_profile("seed-rtx-pro-6000-tp2")
    assert (seed.power_idle_w, seed.power_limit_w, seed.models_power) == (95.0, 600.0, True)
    assert load_profile("test").models_power
    assert not load_profile("test", overrides={"power_idle_w": None}).models_power
    with pytest.raises(SimProfileError, match="power_limit_w is below power_idle_w"):
        load_profile("test", overrides={"power_limit_w": 50.0})
