"""Fresh data (issue 22, rule 3): every hardware id the registry's recipes use is in the farm's catalogue, and
`farm recipe check` warns where `farm submit` would refuse a valid recipe (no worker of this farm could run it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from farm import hardware
from farm.cli.app import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DOCUMENTS = sorted(
    path
    for folder in ("registry", "registry_heldout")
    for path in (FIXTURES / folder).glob("*.json")
    if path.name not in ("canonical.json", "expected.json")
)


def _data(path: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads(path.read_text())
    data = document.get("data", document)
    assert isinstance(data, dict)
    return data


def test_every_hardware_id_the_registry_recipes_use_is_known() -> None:
    """rtx-3060-12gb, rtx-3060-ti-8gb, rtx-4070-12gb, rtx-4080-16gb, the Apple M3 Ultra and M4 Max ids, ...:
    each id a real registry recipe names is one a worker profile can declare."""
    used = {str(_data(path)["hardware_id"]) for path in DOCUMENTS}
    assert {"rtx-3060-12gb", "rtx-3060-ti-8gb", "rtx-4070-12gb", "rtx-4080-16gb", "apple-m4-max-128gb"} <= used
    assert sorted(hardware_id for hardware_id in used if not hardware.is_known(hardware_id)) == []


@pytest.mark.parametrize(
    ("name", "memory_gib", "expected"),
    [
        ("NVIDIA GeForce RTX 3060", None, "rtx-3060-12gb"),
        ("NVIDIA GeForce RTX 3060 Ti", None, "rtx-3060-ti-8gb"),
        ("NVIDIA GeForce RTX 3090 Ti", None, "rtx-3090-ti-24gb"),
        ("NVIDIA GeForce RTX 3090", None, "rtx-3090-24gb"),
        ("NVIDIA GeForce RTX 4080 SUPER", None, "rtx-4080-super-16gb"),
        ("NVIDIA GeForce RTX 4080", None, "rtx-4080-16gb"),
        ("NVIDIA GeForce RTX 3080", 12.0, "rtx-3080-12gb"),
        ("NVIDIA GeForce RTX 3080", 10.0, "rtx-3080-10gb"),
        ("NVIDIA GeForce RTX 3080", None, None),  # two sizes, no memory to tell them apart
    ],
)
def test_added_ids_are_matched_by_the_names_nvml_reports(name: str, memory_gib: float | None, expected: str) -> None:
    """The added ids match their cards' NVML names, the longest name winning (a 3090 Ti is not a 3090), and two
    sizes of one card are told apart by the memory the probe saw."""
    assert hardware.id_for_device_name(name, vendor="nvidia", memory_gib=memory_gib) == expected


def test_apple_ids_that_memory_cannot_tell_apart_are_not_guessed() -> None:
    """apple-m3-ultra-96gb-60c and -80c differ in GPU cores only: the chip and memory name neither."""
    assert hardware.id_for_apple_chip("Apple M4 Max", 128) == "apple-m4-max-128gb"
    assert hardware.id_for_apple_chip("Apple M3 Ultra", 96) is None
    assert hardware.id_for_apple_chip("Apple M3 Ultra", 512) == "apple-m3-ultra-512gb"


def test_recipe_check_warns_where_submit_would_refuse(tmp_path: Path) -> None:
    """A real recipe on a hardware id no catalogue has is valid (the id is well formed) but no worker can declare
    it: `farm recipe check` accepts it and warns that `farm submit` would refuse it."""
    document = json.loads(
        (FIXTURES / "registry" / "gemma-4-12b-it-q4-k-m-rtx-3060-12gb-llama-cpp-tp1.json").read_text()
    )
    document["hardware_id"] = "rtx-9090-48gb"
    path = tmp_path / "unknown-hardware.json"
    path.write_text(json.dumps(document))
    result = CliRunner().invoke(app, ["recipe", "check", str(path)])
    assert result.exit_code == 0
    assert "ok" in result.output
    assert "warning: `farm submit` would refuse it: unknown hardware id 'rtx-9090-48gb'" in result.output.replace(
        "\n", " "
    ).replace("  ", " ")


def test_recipe_check_warns_when_no_worker_runs_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real MLX recipe, on a farm whose workers run no MLX (the table's launchable engines, narrowed at the
    seam `check_runnable` reads): `farm recipe check` accepts it and warns that `farm submit` would refuse it, with
    the engines the workers do run; the same recipe with MLX among them gets no warning."""
    from farm.engines import admission

    path = next(p for p in sorted((FIXTURES / "registry").glob("*-mlx-tp1.json")))
    plain = CliRunner().invoke(app, ["recipe", "check", str(path)])
    assert plain.exit_code == 0
    assert "would refuse it" not in plain.output
    monkeypatch.setattr(admission, "launchable_engines", lambda: ("vllm", "llama.cpp"))
    result = CliRunner().invoke(app, ["recipe", "check", str(path)])
    assert result.exit_code == 0
    flat = " ".join(result.output.split())
    assert "warning: `farm submit` would refuse it: the recipe is valid, but no worker of this farm runs mlx" in flat
    assert "(the farm's workers run: vllm, llama.cpp)" in flat
