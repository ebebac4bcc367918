"""The worker profiles shipped in workers/ load, and profile errors name the field."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from farm.errors import ProfileError
from farm.worker.profile import WorkerProfile, load_profile

WORKERS = Path(__file__).resolve().parents[2] / "workers"


@pytest.mark.parametrize("path", sorted(WORKERS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_profile_loads(path: Path) -> None:
    """Each profile validates and serves at least its own hardware class."""
    profile = load_profile(path)
    own = f"{profile.hardware.hardware_id} x {profile.hardware.count}"
    assert any(c.removeprefix("sim:") == own for c in profile.hardware_classes())


def test_the_seed_host_also_takes_single_card_jobs() -> None:
    """The 2-card seed host serves `x 2` first, then `x 1`; a simulator worker only simulated classes."""
    assert load_profile(WORKERS / "rtx-pro-6000-x2.toml").hardware_classes() == (
        "rtx-pro-6000-blackwell-96gb x 2",
        "rtx-pro-6000-blackwell-96gb x 1",
    )
    assert load_profile(WORKERS / "demo-sim.toml").hardware_classes() == ("sim:rtx-pro-6000-blackwell-96gb x 2",)


def test_the_llamacpp_host_runs_llama_cpp_with_its_model_under_the_roots() -> None:
    """The llama.cpp CPU profile runs llama.cpp only, and its model file's directory is one of its path roots."""
    from farm.worker.engines import engine_policy

    profile = load_profile(WORKERS / "llamacpp-cpu.toml")
    assert profile.engine.runs() == ("llama.cpp",)
    (model,) = profile.engine.llamacpp.model_paths.values()
    assert str(Path(model).expanduser().parent) in engine_policy(profile).path_roots


def test_a_profile_names_its_engines_by_any_spelling() -> None:
    """`engines` takes the registry's spellings and keeps canonical names; an unknown engine is refused."""
    text = 'name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 1\n[engine]\nkind = "sim"\n'
    data = tomllib.loads(text + 'engines = ["vLLM", "llama-cpp"]\n')
    data["name"] = "x"
    assert WorkerProfile.model_validate(data).engine.runs() == ("vllm", "llama.cpp")
    data["engine"]["engines"] = ["tgi"]
    with pytest.raises(ValueError, match="unknown engine"):
        WorkerProfile.model_validate(data)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 0\n', "hardware.count"),
        ('name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 1\n[engine]\nkind = "tgi"\n', "engine.kind"),
        (
            'name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 1\n[worker]\non_sigterm = "panic"\n',
            "worker.on_sigterm",
        ),
        ('name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 1\nsurprise = 1\n', "hardware.surprise"),
        ('name = "x"\n[hardware\n', None),
    ],
)
def test_bad_profiles_name_the_file_and_field(tmp_path: Path, text: str, field: str | None) -> None:
    """A bad profile is refused with the file, and the field when there is one."""
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert "bad.toml" in str(caught.value)
    if field:
        assert caught.value.field == field


def test_cost_section_states_the_prices_used_for_cost_per_token(tmp_path: Path) -> None:
    """`[cost]` gives the hourly cost and the electricity price (the demo states both); none stated, no cost;
    a currency that is not an ISO code, or a negative price, is refused naming the field."""
    from farm.bench.energy import Prices

    demo = load_profile(WORKERS / "demo-sim.toml")
    assert demo.cost.prices() == Prices(cost_per_hour=2.40, electricity_per_kwh=0.30, currency="USD")
    assert not load_profile(WORKERS / "rtx-pro-6000-x2.toml").cost.prices().stated
    base = 'name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 1\n'
    for section, field in (
        ('[cost]\ncurrency = "dollars"\n', "cost.currency"),
        ("[cost]\nper_hour = -1\n", "cost.per_hour"),
    ):
        path = tmp_path / "bad.toml"
        path.write_text(base + section)
        with pytest.raises(ProfileError) as caught:
            load_profile(path)
        assert caught.value.field == field


VLLM_HOST = 'name = "x"\n[hardware]\nhardware_id = "cpu"\ncount = 1\n[engine]\nkind = "vllm"\n'


def test_vllm_dev_mode_is_one_switch_for_a_loopback_vllm_process() -> None:
    """`dev_mode_reset` puts VLLM_SERVER_DEV_MODE=1 in the engine's environment, on loopback only, for a vLLM
    process only; setting the variable through extra_env is refused, pointing at the switch."""
    from farm.worker.engines import vllm_extra_env

    on = WorkerProfile.model_validate(tomllib.loads(VLLM_HOST + "[engine.vllm]\ndev_mode_reset = true\n"))
    assert vllm_extra_env(on.engine.vllm) == {"VLLM_SERVER_DEV_MODE": "1"}
    assert vllm_extra_env(WorkerProfile.model_validate(tomllib.loads(VLLM_HOST)).engine.vllm) == {}
    wide = VLLM_HOST + 'host = "0.0.0.0"\n[engine.vllm]\ndev_mode_reset = true\n'
    with pytest.raises(ValueError, match="dev_mode_reset needs engines on a loopback address"):
        WorkerProfile.model_validate(tomllib.loads(wide))
    container = VLLM_HOST.replace('"vllm"', '"vllm-container"') + "[engine.vllm]\ndev_mode_reset = true\n"
    with pytest.raises(ValueError, match="applies to kind = 'vllm'"):
        WorkerProfile.model_validate(tomllib.loads(container))
    sneaked = VLLM_HOST + '[engine.vllm.extra_env]\nVLLM_SERVER_DEV_MODE = "1"\n'
    with pytest.raises(ValueError, match="use dev_mode_reset = true"):
        WorkerProfile.model_validate(tomllib.loads(sneaked))
    ipv6 = VLLM_HOST + 'host = "::1"\n[engine.vllm]\ndev_mode_reset = true\n'
    assert WorkerProfile.model_validate(tomllib.loads(ipv6)).engine.vllm.dev_mode_reset
