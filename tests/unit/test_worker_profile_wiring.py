"""Worker profiles with the newer seams wired in: endpoint engines and AMD / Apple hardware probes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from farm.engines.endpoint.adapter import EndpointEngine
from farm.errors import EngineError, ProfileError
from farm.hardware.amd import ROCM_SMI_INFO, ROCM_SMI_MEMORY, AmdProbe
from farm.hardware.apple import SYSCTL_CHIP, SYSCTL_MEMORY, SYSTEM_PROFILER, AppleProbe
from farm.hardware.probe import DeclaredProbe, HardwareProbe
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.worker.engines import default_engine_factory, probe_for
from farm.worker.profile import WorkerProfile

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "tests" / "fixtures" / "probes"


def profile(**sections: Any) -> WorkerProfile:
    """A profile from its sections, the way load_profile validates a TOML document."""
    return WorkerProfile.model_validate({"name": "p", **sections})


def recipe(engine: str = "vllm", model: str = "org/model") -> Recipe:
    """A minimal recipe of one card."""
    return Recipe(
        id="r",
        model_id=model,
        hardware_id="rtx-pro-6000-blackwell-96gb",
        hardware_count=1,
        engine=Engine(name=engine),
        argv=(engine, "serve", model),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


ENDPOINT: dict[str, dict[str, Any]] = {
    "hardware": {"hardware_id": "rtx-pro-6000-blackwell-96gb", "count": 2},
    "engine": {
        "kind": "endpoint",
        "endpoint": {"url": "http://me:pw@10.0.0.5:8000", "served_models": {"org/model": "served-name"}},
    },
}


def test_endpoint_profile_builds_an_endpoint_engine_for_the_recipe(tmp_path: Path) -> None:
    """kind = "endpoint": the factory returns the endpoint engine with the endpoint's name for the model, the
    probe is the declared hardware (nothing here to probe), and the profile is not a simulator."""
    endpoint = profile(**ENDPOINT)
    probe = probe_for(endpoint)
    assert type(probe) is DeclaredProbe
    assert probe.memory_used_mib() == ()
    engine = default_engine_factory(recipe(), endpoint, 1234, tmp_path / "engine.log", probe)
    assert isinstance(engine, EndpointEngine)
    assert engine.served_model == "served-name"
    assert engine.public_url == "http://10.0.0.5:8000"
    assert engine.argv == ()
    assert not engine.simulated
    assert not endpoint.simulated
    assert endpoint.hardware_classes() == ("rtx-pro-6000-blackwell-96gb x 2",)


def test_simulated_endpoint_claims_simulated_jobs() -> None:
    """An endpoint that is the farm's simulator makes the worker a simulator worker: it claims sim: classes."""
    section = {**ENDPOINT["engine"]["endpoint"], "simulated": True}
    sim = profile(hardware=ENDPOINT["hardware"], engine={"kind": "endpoint", "endpoint": section})
    assert sim.simulated
    assert sim.hardware_classes() == ("sim:rtx-pro-6000-blackwell-96gb x 2",)


def test_endpoint_refuses_a_recipe_of_an_engine_it_does_not_stand_in_for(tmp_path: Path) -> None:
    """The engines an endpoint serves are the profile's; another engine's recipe is a bad recipe here."""
    endpoint = profile(**ENDPOINT)
    with pytest.raises(EngineError, match="this endpoint serves vllm; the recipe wants 'sglang'"):
        default_engine_factory(recipe("sglang"), endpoint, 1, tmp_path / "e.log", probe_for(endpoint))


@pytest.mark.parametrize(
    ("engine", "hardware", "phrase"),
    [
        ({"kind": "endpoint"}, {}, r"needs an \[engine.endpoint\] section"),
        (ENDPOINT["engine"], {"source": "nvml"}, "an endpoint's server is elsewhere"),
        ({"kind": "endpoint", "endpoint": {"url": "http://h:1", "colour": "red"}}, {}, "Extra inputs"),
    ],
)
def test_bad_endpoint_profiles_are_refused(engine: dict[str, Any], hardware: dict[str, Any], phrase: str) -> None:
    """An endpoint kind without its section, with a detecting probe, or with an unknown key is refused."""
    with pytest.raises(ValueError, match=phrase):
        profile(hardware={**ENDPOINT["hardware"], **hardware}, engine=engine)


def _runner(outputs: dict[tuple[str, ...], str]) -> Any:
    """A command runner that answers the recorded outputs of the real tools."""

    def run(argv: Sequence[str]) -> str:
        if tuple(argv) not in outputs:
            raise ProfileError(f"{argv[0]} is not installed on this host", field="hardware.source")
        return outputs[tuple(argv)]

    return run


ROCM_7900 = (PROBES / "rocm-smi-7900xtx-x2.json").read_text()
FAKE_TOOLS: dict[str, Callable[[tuple[int | str, ...]], HardwareProbe]] = {
    "amd": lambda restrict_to: AmdProbe(
        _runner({ROCM_SMI_INFO: ROCM_7900, ROCM_SMI_MEMORY: ROCM_7900}), restrict_to=restrict_to
    ),
    "apple": lambda restrict_to: AppleProbe(
        _runner(
            {
                SYSCTL_CHIP: "Apple M3 Max\n",
                SYSCTL_MEMORY: "68719476736\n",
                SYSTEM_PROFILER: (PROBES / "system_profiler-m3-max.json").read_text(),
            }
        )
    ),
}


def fake_detect(source: str, restrict_to: tuple[int | str, ...]) -> HardwareProbe:
    """probe_from_source with the real probes over the recorded outputs of rocm-smi, sysctl, system_profiler."""
    probe: HardwareProbe = FAKE_TOOLS[source](restrict_to)
    return probe


@pytest.mark.parametrize(
    ("source", "hardware_id", "count", "probe_type"),
    [
        ("amd", "rx-7900-xtx-24gb", 2, AmdProbe),
        ("apple", "apple-m3-max-64gb", 1, AppleProbe),
    ],
)
def test_amd_and_apple_sources_detect_what_the_profile_declares(
    source: str, hardware_id: str, count: int, probe_type: type
) -> None:
    """hardware.source = amd / apple: the worker's probe is the detecting one, and it finds the declared devices."""
    host = profile(hardware={"source": source, "hardware_id": hardware_id, "count": count}, engine={"kind": "vllm"})
    probe = probe_for(host, detect=fake_detect)
    assert isinstance(probe, probe_type)
    report = probe.report()
    assert (report.hardware_id, report.count, report.declared) == (hardware_id, count, False)


def test_a_detected_mismatch_is_refused_naming_the_tool() -> None:
    """rocm-smi finding other cards than the profile declares is a profile error naming both."""
    host = profile(
        hardware={"source": "amd", "hardware_id": "rtx-pro-6000-blackwell-96gb", "count": 2}, engine={"kind": "vllm"}
    )
    with pytest.raises(ProfileError, match=r"rocm-smi found 2 x rx-7900-xtx-24gb; the profile declares 2 x rtx-pro"):
        probe_for(host, detect=fake_detect)


def test_a_missing_tool_is_a_clear_refusal() -> None:
    """A host without rocm-smi (the real probe's runner finds no tool) refuses to start, naming the tool."""
    host = profile(hardware={"source": "amd", "hardware_id": "rx-7900-xtx-24gb", "count": 2}, engine={"kind": "vllm"})

    def no_tools(source: str, restrict_to: tuple[int | str, ...]) -> HardwareProbe:
        return AmdProbe(_runner({}), restrict_to=restrict_to)

    with pytest.raises(ProfileError, match="rocm-smi is not installed"):
        probe_for(host, detect=no_tools)
