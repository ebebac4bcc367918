"""Pastes read as a person would (issue 22, rule 2): each rule general, named in `command_notes` where it changes
what was written, and held to a real registry document (tests/fixtures/registry). What launches is still the
canonical argv, judged (farm.engines.policy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from farm.engines.admission import check_recipe_for_submit
from farm.errors import ArgumentPolicyError, RecipeError
from farm.recipes.commands import around_a_command, repair_unquoted_json
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


def test_json_that_lost_its_quotes_is_repaired_where_it_has_one_reading() -> None:
    """Both copies of the command lost the quotes of `--compilation-config {cudagraph_mode:FULL_AND_PIECEWISE,
    custom_ops:[all]}`. Bare keys and bare words have one JSON reading; it is used, and a note says so."""
    recipe = load_recipe(REGISTRY / "deepseek-v4-flash-dspark-fp8-rtx-pro-6000-blackwell-96gb-vllm-tp2.json")
    argv = list(recipe.argv)
    config = argv[argv.index("--compilation-config") + 1]
    assert json.loads(config) == {"cudagraph_mode": "FULL_AND_PIECEWISE", "custom_ops": ["all"]}
    assert any("lost its JSON quotes" in note for note in recipe.provenance.command_notes)


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("{method:mtp,num_speculative_tokens:4}", {"method": "mtp", "num_speculative_tokens": 4}),
        ("{a:[x,2,true]}", {"a": ["x", 2, True]}),
        ("[edit: the port was wrong]", None),  # a remark in brackets: spaces, no reading
        ("{a:1,a:2}", None),  # a key twice: which one?
        ("{a:b:c}", None),
        ('{"a":1', None),  # quotes left: not a quote-less copy
    ],
)
def test_repair_unquoted_json(text: str, reading: object) -> None:
    """Exactly one reading or none."""
    repaired = repair_unquoted_json(text)
    assert (json.loads(repaired) if repaired is not None else None) == reading


def test_a_repeated_option_is_read_as_the_engine_reads_it() -> None:
    """The pasted command gives `--max-cudagraph-capture-size 192` twice; vLLM's argparse keeps the last. The
    command keeps it once (the last), and a note says so. The judge then refuses the command for another cause, the
    one it names: it trusts remote code without pinning a revision (farm.engines.trust), not the repetition."""
    recipe = load_recipe(
        REGISTRY
        / "discord-deepseek-ai-deepseek-v4-flash-2-bit-experts-vllm-moet-w2-fp8-kv-rtx-pro-6000-blackwell-96gb-tp2.json"
    )
    assert recipe.argv.count("--max-cudagraph-capture-size") == 1
    assert any("given more than once" in note for note in recipe.provenance.command_notes)
    assert recipe.container is not None
    assert recipe.container.arguments.count("--max-cudagraph-capture-size") == 1
    with pytest.raises(ArgumentPolicyError) as caught:
        check_recipe_for_submit(recipe)
    assert "remote code is trusted" in caught.value.detail
    assert "more than once" not in caught.value.detail


def test_a_closing_remark_and_a_label_around_a_command_are_cut() -> None:
    """A real recorded command (a llama-bench run) pasted with a `command:` label before it and a remark in
    parentheses after it, as chat messages carry them: the command is what is between, and a note names what was
    left out."""
    document = _document("gemma-4-12b-it-q4-k-m-rtx-3060-12gb-llama-cpp-tp1.json")
    section = document["metadata"]["localmaxxing"]
    tokens = ["command:", *section["tokenized"]["arguments"], "(2x", "RTX", "3060,", "driver", "580)"]
    section["tokenized"]["arguments"] = tokens
    section["observed_command"] = " ".join(tokens)
    pasted = parse_registry(json.dumps(document), "pasted.json")
    clean = load_recipe(REGISTRY / "gemma-4-12b-it-q4-k-m-rtx-3060-12gb-llama-cpp-tp1.json")
    assert pasted.argv == clean.argv
    assert any(
        "chat text around the command" in note and "driver 580" in note for note in pasted.provenance.command_notes
    )


def test_a_one_word_bracket_value_is_not_a_remark() -> None:
    """`[gpu]` as a compose key's value, or a bracketed list as an option's value, is never cut as a remark."""
    assert around_a_command(["llama-server", "--x", "[gpu]"]) == (["llama-server", "--x", "[gpu]"], [])
    assert around_a_command(["llama-server", "--a", "1", "(see", "--b", "2)"])[1] == []


def test_messages_name_the_real_cause() -> None:
    """Refusals that named a missing model now name what the arguments are: a shell's `-c` script (a custom image
    whose entrypoint is a shell), `docker run` options pasted as the command, another engine's model option."""
    with pytest.raises(RecipeError, match="shell's -c script"):
        load_recipe(REGISTRY / "discord-lukealonso-mimo-v2-5-nvfp4-nvfp4-rtx-pro-6000-blackwell-96gb-tp0-918243.json")
    with pytest.raises(RecipeError, match="`docker run` options"):
        load_recipe(REGISTRY / "discord-qwen-qwen3-6-27b-fp8-fp8-33492-rtx-5090-32gb-tp1-599053.json")
    document = _document("qwen3-6-27b-fp8-dgx-spark-gb10-128gb-sglang-tp1.json")
    document["engine"]["name"] = "vllm"
    document["metadata"]["localmaxxing"]["tokenized"]["arguments"] = ["vllm", "serve", "--model-path", "Qwen/Q-FP8"]
    document["metadata"]["localmaxxing"]["observed_command"] = "vllm serve --model-path Qwen/Q-FP8"
    with pytest.raises(RecipeError, match="with --model-path, which is not a vllm option"):
        parse_registry(json.dumps(document), "model-path.json")


def test_a_model_the_recipe_names_plainly_is_its_model() -> None:
    """The Ollama run's launch records `ollama pull hf.co/unsloth/gemma-4-12b-it-GGUF:Q4_K_M` and `ollama serve`;
    the farm's snapshot of the registry's instances lacks the instance. The pulled model is the recipe's model."""
    recipe = load_recipe(REGISTRY / "gemma-4-12b-q4-k-m-dgx-spark-gb10-128gb-ollama-tp1.json")
    assert recipe.model_id == "hf.co/unsloth/gemma-4-12b-it-GGUF:Q4_K_M"
    assert recipe.provenance.model_source == "launch.observed_command"
    assert recipe.argv == ("ollama", "serve")
    assert any("named plainly" in note for note in recipe.provenance.command_notes)


def test_a_line_continuation_is_read_as_a_shell_reads_it() -> None:
    """The recorded command written over several lines with a backslash ending each (as scripts and READMEs write
    them): a shell joins the lines, so the command is the same one the token list records. (Seen first in the held-out
    sample, tests/fixtures/registry_heldout; held here to a fixture's command.)"""
    document = _document("gemma-4-12b-it-q4-k-m-rtx-3060-12gb-llama-cpp-tp1.json")
    section = document["metadata"]["localmaxxing"]
    section["observed_command"] = section["observed_command"].replace(" -", " \\\n  -")
    assert "\\\n" in section["observed_command"]
    continued = parse_registry(json.dumps(document), "continued.json")
    clean = load_recipe(REGISTRY / "gemma-4-12b-it-q4-k-m-rtx-3060-12gb-llama-cpp-tp1.json")
    assert continued.argv == clean.argv
