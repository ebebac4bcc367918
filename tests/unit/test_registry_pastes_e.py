"""Pastes read as a person would, fourth pass of issue 22: the wrong refusals held-out sample E showed (a path with
a space split in two inside `metadata.localmaxxing.tokenized.arguments`, an edit note in brackets after a complete
vLLM command), each fixed as a general rule named in `command_notes`. The three documents that showed them were
copied from tests/fixtures/registry_heldout_e into tests/fixtures/registry as tuned fixtures. What launches is
still the canonical argv, judged; near misses of each rule stay for the judge to refuse."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from farm.engines.admission import check_recipe_for_submit
from farm.engines.environment import value_refused_reason
from farm.errors import ArgumentPolicyError, RecipeError
from farm.recipes.commands import around_a_command
from farm.recipes.parse import load_recipe, parse_registry
from farm.recipes.pasted_words import rejoin_split_paths

REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "registry"
SPLIT_PATHS = (
    REGISTRY / "qwen3-8b-q4-k-m-apple-m3-ultra-512gb-llama-cpp-tp1.json",
    REGISTRY / "ornith-1-0-35b-q4-k-m-apple-m3-ultra-512gb-llama-cpp-tp1.json",
)
EDIT_NOTE = REGISTRY / "discord-lil-lribeiro-qwen3-8-27b-nvfp4-v17-unpinned-rtx-pro-6000-blackwell-96gb-tp0-603530.json"
IMAGE_AND_PROSE = REGISTRY / "discord-lil-glm53-flash-nvfp4-46aaae8a8203-rtx-pro-6000-blackwell-96gb-tp0-545832.json"
COMPOSE_OPTIONS = REGISTRY / "discord-lil-lukealonso-glm-5-2-nvfp4-unpinned-rtx-pro-6000-blackwell-96gb-tp0.json"
BLANK_IN_IMAGE = REGISTRY / "discord-lil-sehyo-qwen3-5-27b-nvfp4-unpinned-rtx-pro-6000-blackwell-96gb-tp1-069215.json"


def _document(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@pytest.mark.parametrize("path", SPLIT_PATHS, ids=lambda path: path.name[:30])
def test_a_path_split_at_a_space_in_tokenized_arguments_is_one_path(path: Path) -> None:
    """`-m /Volumes/Extreme Pro/.../X-Q4_K_M.gguf` reached the token list as two words: the two join into the one
    `.gguf` path `-m` takes (noted), which stands for the recipe's instance; no stray word reaches the judge, and
    every recorded serving option is kept."""
    recipe = load_recipe(path)
    assert not any(token.startswith("Pro/") for token in recipe.argv)
    notes = " ".join(recipe.provenance.command_notes)
    assert "a path split at its spaces ('/Volumes/Extreme Pro/" in notes
    assert "stands for registry instance" in notes
    assert recipe.model_id == recipe.model_instance_id
    command = check_recipe_for_submit(recipe)
    assert command.value("--ctx-size") == "8192"
    assert command.value("--gpu-layers") == "99"


def test_the_same_split_path_in_the_observed_command_alone_is_one_path() -> None:
    """The rule reads the observed command the same way (there the shell split the path): the document without
    its token list gives the same argv."""
    document = _document(SPLIT_PATHS[0])
    both = parse_registry(json.dumps(document), "both.json")
    del document["metadata"]["localmaxxing"]["tokenized"]
    observed = parse_registry(json.dumps(document), "observed.json")
    assert observed.provenance.command_source == "metadata.localmaxxing.observed_command"
    assert observed.argv == both.argv


def test_the_same_split_path_in_a_top_level_argv_is_one_path() -> None:
    """And in the farm's own top-level `argv` shape: the two words are the one path there too, which stands for the
    instance as from the token list; no stray word is left."""
    document = _document(SPLIT_PATHS[0])
    document["argv"] = document["metadata"]["localmaxxing"]["tokenized"]["arguments"]
    recipe = parse_registry(json.dumps(document), "argv.json")
    assert recipe.provenance.command_source == "argv"
    assert recipe.argv == load_recipe(SPLIT_PATHS[0]).argv
    assert any("a path split at its spaces" in note for note in recipe.provenance.command_notes)


def test_a_split_path_that_does_not_end_like_the_options_value_stays_refused() -> None:
    """Near miss, on the same document: `-m /Volumes/Extreme Pro` (no file ending, no path going on) is not joined,
    and the stray word is refused as before."""
    document = _document(SPLIT_PATHS[0])
    tokens = document["metadata"]["localmaxxing"]["tokenized"]["arguments"]
    tokens[3] = "Pro"
    document["metadata"]["localmaxxing"]["observed_command"] = " ".join(tokens)
    recipe = parse_registry(json.dumps(document), "near.json")
    with pytest.raises(ArgumentPolicyError, match="a stray value"):
        check_recipe_for_submit(recipe)


@pytest.mark.parametrize(
    ("engine", "args", "joined"),
    [
        ("llama.cpp", ["-m", "/Volumes/Extreme", "Pro/m/Q.gguf", "-c", "8"], ["-m", "/Volumes/Extreme Pro/m/Q.gguf"]),
        ("llama.cpp", ["-m", "/a/My", "Big", "Models/Q.gguf"], ["-m", "/a/My Big Models/Q.gguf"]),
        ("llama.cpp", ["--model=/a/My", "Q.gguf"], ["--model=/a/My Q.gguf"]),
        ("llama.cpp", ["--chat-template-file", "/t/My", "T.jinja"], ["--chat-template-file", "/t/My T.jinja"]),
        ("llama.cpp", ["-m", "C:\\My", "Models\\Q.gguf"], ["-m", "C:\\My Models\\Q.gguf"]),
        ("vllm", ["/data/My", "Models/Qwen3-8B", "--max-model-len", "8"], ["/data/My Models/Qwen3-8B"]),
        # near misses: left as written, for the judge
        ("llama.cpp", ["-m", "/models/a.gguf", "extra", "-c", "8"], None),
        ("llama.cpp", ["-m", "/Volumes/Extreme", "Pro", "-c", "8"], None),
        ("llama.cpp", ["-m", "models/My", "Q.gguf"], None),
        ("llama.cpp", ["--alias", "/a/My", "Q.gguf"], None),
        ("llama.cpp", ["-m", "/a/My", "$(rm).gguf"], None),
        ("vllm", ["org/m", "--chat-template", "/t/My", "Templates/x"], None),
        ("vllm", ["org/model", "extra", "--max-model-len", "8"], None),
    ],
)
def test_rejoin_split_paths(engine: str, args: list[str], joined: list[str] | None) -> None:
    """Only an option that takes a file or directory (its spec's kind) is joined, only from a value that begins
    like a path and is not yet a file, only over words up to the next option, and only when the join ends like the
    option's value (a file ending, or a path that goes on for a directory)."""
    out, notes = rejoin_split_paths(engine, args)
    if joined is None:
        assert (out, notes) == (args, [])
    else:
        assert out[: len(joined)] == joined
        assert len(notes) == 1


def test_an_edit_note_after_a_complete_docker_command_is_cut_from_argv_and_container() -> None:
    """`... --speculative-config {...} [Edited to correct vllm image]`: the five-word note is chat text after a
    complete command; cut (noted) from the argv and from the arguments the official image runs, and the judge
    accepts the command with every recorded option."""
    recipe = load_recipe(EDIT_NOTE)
    assert "[Edited" not in recipe.argv
    assert recipe.container is not None
    assert not any("Edited" in word or word == "image]" for word in recipe.container.arguments)
    assert "--speculative-config" in recipe.container.arguments
    assert any("[Edited to correct vllm image]" in note for note in recipe.provenance.command_notes)
    command = check_recipe_for_submit(recipe)
    assert command.value("--max-model-len") == "262144"


@pytest.mark.parametrize(
    ("replace", "cut"),
    [(["(edited)"], "(edited)"), (["(fixed", "the", "image", "tag", "twice)"], "(fixed the image tag twice)")],
)
def test_a_closing_remark_of_any_length_is_cut(replace: list[str], cut: str) -> None:
    """The same real document with its note as one word, or as a longer remark in parentheses: cut either way,
    since the engine's parser would find the one word stray after the JSON value."""
    document = _document(EDIT_NOTE)
    document["launch"]["arguments"] = [*document["launch"]["arguments"][:-5], *replace]
    recipe = parse_registry(json.dumps(document), "remark.json")
    assert recipe.container is not None
    assert recipe.container.arguments[-1].startswith("{")
    assert any(cut in note for note in recipe.provenance.command_notes)
    check_recipe_for_submit(recipe)


def test_a_remark_before_the_arguments_is_cut() -> None:
    """The note put before the arguments (`[Edited to correct vllm image] MODEL --host ...`) is cut the same way."""
    document = _document(EDIT_NOTE)
    arguments = document["launch"]["arguments"]
    document["launch"]["arguments"] = [*arguments[-5:], *arguments[:-5]]
    recipe = parse_registry(json.dumps(document), "leading.json")
    assert recipe.model_id == "lribeiro/Qwen3.8-27B-nvfp4-v17"
    assert any("[Edited to correct vllm image]" in note for note in recipe.provenance.command_notes)
    check_recipe_for_submit(recipe)


def test_a_one_word_bracket_an_option_takes_is_not_a_remark() -> None:
    """Near miss: a bracketed word that is the value of the option before it (`--tool-call-parser [qwen]`) is
    that option's value, never cut: the judge sees it."""
    document = _document(EDIT_NOTE)
    arguments = document["launch"]["arguments"][:-5]
    index = arguments.index("--tool-call-parser")
    arguments[index + 1] = "[qwen3_coder]"
    document["launch"]["arguments"] = arguments[: index + 2]
    recipe = parse_registry(json.dumps(document), "value.json")
    assert recipe.argv[-2:] == ("--tool-call-parser", '["qwen3_coder"]')  # a value, read as JSON, never cut
    assert not any("chat text" in note for note in recipe.provenance.command_notes)
    assert around_a_command(["vllm", "serve", "m", "--x", "[gpu]"]) == (["vllm", "serve", "m", "--x", "[gpu]"], [])


def test_a_leading_bracket_that_starts_json_is_not_a_remark() -> None:
    """Near miss: a token list that opens with a JSON list is not chat text: it stays, and the reader refuses it."""
    with pytest.raises(RecipeError):
        parse_registry(
            json.dumps(
                {
                    **_document(EDIT_NOTE),
                    "launch": {
                        **_document(EDIT_NOTE)["launch"],
                        "arguments": ['["a",', '"b"]', "--max-model-len", "8"],
                    },
                }
            ),
            "json.json",
        )


def test_a_prose_post_whose_arguments_are_the_image_names_the_image_not_an_environment_variable() -> None:
    """The GLM-5.3 post's arguments are `$IMAGE`, a code fence and a runbook link: the image's own command runs,
    set by its environment. Refused at parse for that, naming `$IMAGE` and the environment, no longer at submit
    for the variable `DCP` (which made the environment look like the only fault)."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(IMAGE_AND_PROSE)
    assert caught.value.field == "launch.arguments"
    assert "the model is '$IMAGE', the image, as a `docker run` line names it" in caught.value.detail
    assert "its environment (DCP, MODEL, PORT, TP) configures the image's own command" in caught.value.detail


def test_a_blank_model_in_an_official_image_is_named_as_a_blank() -> None:
    """`$MODEL` in an official vLLM image's arguments: a blank the paste never filled in, said so (it was refused as
    "a relative path")."""
    with pytest.raises(RecipeError, match=r"the model is '\$MODEL', a blank the paste never filled in"):
        load_recipe(BLANK_IN_IMAGE)


def test_a_compose_launch_with_options_only_names_the_compose_file() -> None:
    """A docker-compose launch whose arguments are three options: refused for the compose file the recipe does
    not carry (with the environment that configures it), not as "names no model"."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(COMPOSE_OPTIONS)
    detail = caught.value.detail
    assert "a docker-compose launch whose arguments" in detail
    assert "'1529479030112522370-docker-compose-v20-fi.yaml', which the recipe does not carry" in detail
    assert "names no model" not in detail


def test_a_switch_whose_name_has_a_paths_word_is_not_called_a_path() -> None:
    """`VLLM_DISABLE_COMPILE_CACHE=0` on the real edit-note document: still refused (a cache of the worker's is the
    profile's to decide), but as the switch vLLM declares it, not as "names a path on the worker"; an unknown
    `..._CACHE=0` is called a value that is no path; a path value keeps the path reason."""
    document = _document(EDIT_NOTE)
    document["launch"]["arguments"] = document["launch"]["arguments"][:-5]
    document["launch"]["environment"] = {"VLLM_DISABLE_COMPILE_CACHE": "0"}
    recipe = parse_registry(json.dumps(document), "switch.json")
    with pytest.raises(ArgumentPolicyError) as caught:
        check_recipe_for_submit(recipe)
    assert "VLLM_DISABLE_COMPILE_CACHE" in str(caught.value)
    assert "a switch of vllm's, not a path" in str(caught.value)
    assert "names a path on the worker" not in str(caught.value)
    assert value_refused_reason("SOME_CACHE", "0", "vllm") is not None
    assert "its value '0' is no path" in str(value_refused_reason("SOME_CACHE", "0", "vllm"))
    assert value_refused_reason("VLLM_CACHE_ROOT", "/x", "vllm") == "names a path on the worker"


@pytest.mark.parametrize("remark", [["[edited]"], ["[see", "below]"]])
def test_a_bracketed_remark_inside_a_command_is_called_a_remark_not_json(remark: list[str]) -> None:
    """A remark in brackets in the middle of the real edit-note document's arguments (after `--port 8000`, no
    option's JSON value) is refused as chat text inside the command, not as JSON whose quotes were lost."""
    document = _document(EDIT_NOTE)
    arguments = document["launch"]["arguments"][:-5]
    document["launch"]["arguments"] = [*arguments[:5], *remark, *arguments[5:]]
    with pytest.raises(RecipeError, match="is a remark in brackets, not a value") as caught:
        parse_registry(json.dumps(document), "remark.json")
    assert "looks like JSON" not in caught.value.detail


def test_a_json_options_value_that_lost_its_quotes_is_still_called_json() -> None:
    """Near miss: the same bracketed shape as the value of a JSON option (`--speculative-config [mtp`) keeps the
    JSON refusal: there it is a value whose quotes were lost."""
    document = _document(EDIT_NOTE)
    arguments = document["launch"]["arguments"][:-5]
    arguments[-1] = "[method:mtp"
    document["launch"]["arguments"] = arguments
    with pytest.raises(RecipeError, match="looks like JSON but is not valid JSON"):
        parse_registry(json.dumps(document), "json.json")


TWO_GPUS = REGISTRY / "gemma-4-31b-it-ud-q6-k-xl-rtx-3090-24gb-llama-cpp-tp2.json"


def _wrapped(path: Path, script: str) -> dict[str, Any]:
    """The real document with its recorded command put inside `bash -c SCRIPT` (SCRIPT's `{}` is the command)."""
    document = _document(path)
    tokenized = document["metadata"]["localmaxxing"]["tokenized"]
    wrapped = ["bash", "-c", script.format(shlex.join(tokenized["arguments"]))]
    tokenized["arguments"] = wrapped
    document["metadata"]["localmaxxing"]["observed_command"] = shlex.join(wrapped)
    return document


def test_a_wrapper_that_orders_the_gpus_and_execs_the_server_is_looked_through() -> None:
    """`bash -c 'export CUDA_DEVICE_ORDER=PCI_BUS_ID; exec llama-server ...'` around the real two-GPU command: read
    as that command (the same canonical argv as the unwrapped document), the variable judged as the recipe's own,
    and the wrapper named in a note, never run."""
    plain = load_recipe(TWO_GPUS)
    recipe = parse_registry(json.dumps(_wrapped(TWO_GPUS, "export CUDA_DEVICE_ORDER=PCI_BUS_ID; exec {}")), "w.json")
    assert recipe.argv == plain.argv
    assert recipe.environment["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert any(
        "bash -c is a wrapper that sets the environment (CUDA_DEVICE_ORDER)" in n
        for n in recipe.provenance.command_notes
    )
    assert check_recipe_for_submit(recipe).render_options() == check_recipe_for_submit(plain).render_options()


@pytest.mark.parametrize(
    "script",
    [
        "patch -p0 < /tmp/fix.diff; exec {}",
        "unset NCCL_GRAPH_FILE; exec {}",
        "export A=$HOME; exec {}",
        "{} | tee /tmp/log",
        "pip install x && exec {}",
    ],
)
def test_a_script_with_any_other_step_is_not_looked_through(script: str) -> None:
    """Near misses: a patch, an `unset` (the farm could not reproduce it), an expansion, a pipe, an install: the
    script is what ran, which the farm cannot judge; refused as before."""
    with pytest.raises(RecipeError, match="script that does more than set the environment and exec the server"):
        parse_registry(json.dumps(_wrapped(TWO_GPUS, script)), "w.json")


def test_a_container_shell_script_that_execs_the_server_runs_the_server_as_read() -> None:
    """The edit-note document's arguments as the shell `-c` script an image with a shell entrypoint takes
    (`set -e; exec vllm serve ...`): read as the vLLM command; the container runs the arguments as read."""
    document = _document(EDIT_NOTE)
    arguments = document["launch"]["arguments"][:-5]
    document["launch"]["arguments"] = ["-c", "set -euo pipefail; exec vllm serve " + shlex.join(arguments)]
    recipe = parse_registry(json.dumps(document), "c.json")
    assert recipe.model_id == "lribeiro/Qwen3.8-27B-nvfp4-v17"
    assert recipe.container is not None
    assert recipe.container.arguments[0] == "lribeiro/Qwen3.8-27B-nvfp4-v17"
    assert "-c" not in recipe.container.arguments
    check_recipe_for_submit(recipe)


def test_a_script_the_recipe_does_not_carry_is_named() -> None:
    """`bash /tmp/bench_b70-gemma4-26b.sh` (held-out sample A, a recorded line): refused for the script the
    recipe does not carry, not as "executable 'bash' is not a known engine's server"."""
    path = REGISTRY.parent / "registry_heldout" / "gemma-4-26b-a4b-q8-k-xl-intel-arc-pro-b70-32gb-llama-cpp-tp1.json"
    with pytest.raises(RecipeError, match=r"runs the script '/tmp/bench_b70-gemma4-26b.sh' with bash, which the"):
        load_recipe(path)


def test_a_copy_that_kept_the_path_whole_agrees_with_the_copy_that_split_it() -> None:
    """The real M3 Ultra document with its observed command quoting the path (`-m '/Volumes/Extreme Pro/...'`)
    while the token list split it: the two copies are one command once the split path is joined, not copies that
    disagree; the argv is the same as where both split it."""
    document = _document(SPLIT_PATHS[0])
    tokens = document["metadata"]["localmaxxing"]["tokenized"]["arguments"]
    whole = [*tokens[:2], f"{tokens[2]} {tokens[3]}", *tokens[4:]]
    document["metadata"]["localmaxxing"]["observed_command"] = shlex.join(whole)
    recipe = parse_registry(json.dumps(document), "quoted.json")
    assert recipe.provenance.command_source == "metadata.localmaxxing.observed_command"
    assert recipe.argv == load_recipe(SPLIT_PATHS[0]).argv


def test_a_switch_given_twice_is_the_switch_once() -> None:
    """The edit-note document with `--enable-chunked-prefill` given a second time at the end (a boolean option
    twice): vLLM's parser reads the switch, so the command renders it once, with a note, and is accepted."""
    document = _document(EDIT_NOTE)
    document["launch"]["arguments"] = [*document["launch"]["arguments"][:-5], "--enable-chunked-prefill"]
    recipe = parse_registry(json.dumps(document), "twice.json")
    assert recipe.argv.count("--enable-chunked-prefill") == 1
    assert recipe.container is not None
    assert recipe.container.arguments.count("--enable-chunked-prefill") == 1
    assert any("--enable-chunked-prefill is given more than once" in note for note in recipe.provenance.command_notes)
    assert check_recipe_for_submit(recipe).enabled("--enable-chunked-prefill")


def test_a_server_run_inside_the_authors_environment_names_it() -> None:
    """`toolbox run -c flashnext-strix -- llama-server ...` (sample E, a forked build in a toolbox container):
    refused for the environment the server ran in, whose build the recipe does not show, not as "executable
    'toolbox' is not a known engine's server"."""
    path = REGISTRY / "qwen3-8-flash-next-unsloth-dynamic-iq4-xs-ryzen-ai-max-plus-395-128gb-llama-cpp-tp1.json"
    with pytest.raises(RecipeError, match=r"runs 'llama-server' inside 'toolbox run -c flashnext-strix', an env"):
        load_recipe(path)
