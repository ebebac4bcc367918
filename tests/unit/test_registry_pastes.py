"""Pastes read as a person would (issue 22, rule 2): each rule general, named in `command_notes` where it changes
what was written, and held to a real registry document (tests/fixtures/registry). What launches is still the
canonical argv, judged (farm.engines.policy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from farm.engines.policy import check_recipe_for_submit
from farm.errors import RecipeError
from farm.recipes.parse import load_recipe, parse_registry

REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "registry"


def _document(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((REGISTRY / name).read_text())
    return loaded


def test_compose_keys_after_a_flattened_command_list_are_cut() -> None:
    """A compose service pasted whole: the `command:` list flattened with its `-` bullets, then `ipc: host`,
    `ulimits: memlock: -1`, `deploy: resources: reservations: devices: - driver: nvidia device_ids: [...]
    capabilities: [gpu]` and a closing fence. The command is the list; the service keys say how its container
    runs, which the recipe's own container fields say for the farm."""
    recipe = load_recipe(
        REGISTRY / "discord-lil-festr2-glm-5-nvfp4-mtp-unpinned-rtx-pro-6000-blackwell-96gb-tp8-974526.json"
    )
    assert recipe.argv[:4] == ("python", "-m", "sglang.launch_server", "--model-path=/model")
    assert recipe.argv[-1] == "--enable-metrics"
    assert not any(token.endswith(":") or token in ("[gpu]", "-") for token in recipe.argv)


def test_sglang_official_image_entrypoint_runs_its_arguments() -> None:
    """lmsysorg/sglang's entrypoint is NVIDIA's `/opt/nvidia/nvidia_entrypoint.sh`, which execs its arguments;
    the draft launch gives `python3 -m sglang.launch_server ...` as those arguments. The arguments are the command
    (the wrapper is named in a note, never run as one), and the judge accepts the canonical argv. The real
    document's recorded command is taken away here, so that the draft launch is what is read."""
    document = _document("qwen3-6-27b-fp8-dgx-spark-gb10-128gb-sglang-tp1.json")
    document["metadata"].pop("localmaxxing")
    recipe = parse_registry(json.dumps(document), "sglang-draft.json")
    assert recipe.argv[:5] == ("python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B-FP8")
    assert recipe.provenance.command_source == "draft_launch.arguments"
    assert any(
        "nvidia_entrypoint.sh" in note and "runs its arguments" in note for note in recipe.provenance.command_notes
    )
    command = check_recipe_for_submit(recipe)
    assert command.model == "Qwen/Qwen3.6-27B-FP8"


def test_another_entrypoint_is_still_refused() -> None:
    """Only the official image's own wrapper is looked through: a custom image's entrypoint stays refused."""
    document = _document("qwen3-6-27b-fp8-dgx-spark-gb10-128gb-sglang-tp1.json")
    document["metadata"].pop("localmaxxing")
    document["draft_launch"]["image"] = "example/sglang-custom:latest"
    with pytest.raises(RecipeError, match="is not sglang's server"):
        parse_registry(json.dumps(document), "custom.json")
