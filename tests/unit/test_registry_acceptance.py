"""Real registry recipes: what `farm recipe check` accepts launches exactly what the document means.

tests/fixtures/registry/canonical.json records, for each real recipe, the verdict of parse + submit policy and,
for an accepted one, the canonical argv the farm re-renders from the judged command (bench/registry_acceptance.py
writes the same). It is a regression guard: a change in reading or rendering that alters what would be launched
fails here, recipe by recipe.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from farm.engines.admission import check_recipe_for_submit, check_runnable
from farm.engines.argspec import CanonicalCommand
from farm.engines.container import check_container_launch, docker_run_argv
from farm.engines.environment import check_recipe_environment, dropped_names
from farm.engines.policy import DEFAULT_POLICY
from farm.engines.vllm.adapter import vllm_process_argv
from farm.errors import ArgumentPolicyError, InputError, RecipeError
from farm.recipes.parse import load_recipe, parse_registry

REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "registry"
BAD = Path(__file__).resolve().parents[1] / "fixtures" / "bad"
CANONICAL: dict[str, dict[str, Any]] = json.loads((REGISTRY / "canonical.json").read_text())
ACCEPTED = sorted(name for name, verdict in CANONICAL.items() if verdict["status"] == "ok")
REFUSED = sorted(name for name, verdict in CANONICAL.items() if verdict["status"] != "ok")


def _canonical(command: CanonicalCommand) -> list[str]:
    launcher = command.spec.prefixes[0] if command.spec.prefixes else ()
    model: list[str] = []
    if command.model is not None:
        spec = command.spec
        model = (
            [command.model] if spec.positional_model or not spec.model_option else [spec.model_option, command.model]
        )
    return [*launcher, *model, *command.without("--host", "--port").render_options()]


def _recipe(**changes: Any) -> str:
    document: dict[str, Any] = {
        "schema_version": "local-ai-registry/v1",
        "id": "acceptance-test",
        "hardware_id": "h200-141gb",
        "hardware_count": 1,
        "engine": {"name": "vllm"},
    }
    document.update(changes)
    return json.dumps(document)


def test_every_registry_fixture_has_a_canonical_verdict() -> None:
    """No real recipe goes without its recorded verdict."""
    names = {path.name for path in REGISTRY.glob("*.json")} - {"expected.json", "canonical.json"}
    assert names == set(CANONICAL)
    assert ACCEPTED, "at least one real recipe is accepted"


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_recipe_launches_its_recorded_canonical_argv(name: str) -> None:
    """An accepted recipe's judged command re-renders to exactly the recorded argv: one subcommand, the recipe's
    model, every JSON value valid JSON."""
    recipe = load_recipe(REGISTRY / name)
    command = check_recipe_for_submit(recipe)
    argv = _canonical(command)
    assert argv == CANONICAL[name]["argv"]
    launcher = list(command.spec.prefixes[0])
    assert argv[: len(launcher)] == launcher
    assert argv[len(launcher) :].count("serve") == 0, "one subcommand, not two"
    if command.model is not None:
        assert command.model == recipe.model_id
    for option in command.options:
        for value in option.values:
            if value.startswith(("{", "[")):
                json.loads(value)


@pytest.mark.parametrize("name", [name for name in ACCEPTED if CANONICAL[name]["argv"][:2] == ["vllm", "serve"]])
def test_accepted_vllm_recipe_process_argv_is_the_canonical_one(name: str) -> None:
    """What the worker runs for an accepted vLLM recipe is that canonical argv, with the worker's own address."""
    recipe = load_recipe(REGISTRY / name)
    command = check_recipe_for_submit(recipe)
    argv = vllm_process_argv(recipe, executable=("vllm", "serve"), host="127.0.0.1", port=8123, command=command)
    assert list(argv) == [*CANONICAL[name]["argv"], "--host", "127.0.0.1", "--port", "8123"]


@pytest.mark.parametrize("name", REFUSED)
def test_refused_recipe_names_its_field(name: str) -> None:
    """A refused real recipe is refused at the recorded stage, naming the recorded field, without a traceback."""
    verdict = CANONICAL[name]
    with pytest.raises(InputError) as caught:
        check_recipe_for_submit(load_recipe(REGISTRY / name))
    assert caught.value.field == verdict["field"]
    assert isinstance(caught.value, RecipeError) == (verdict["status"] == "FAIL")
    assert caught.value.detail


def test_hardware_outside_the_catalogue_is_valid_but_refused_at_submit() -> None:
    """A well-formed hardware id the catalogue lacks is kept as the recipe spells it; submit refuses the job,
    since no worker profile can name that hardware."""
    recipe = load_recipe(BAD / "unknown_hardware_id.json")
    assert recipe.hardware_id == "tpu-v5e"
    check_recipe_for_submit(recipe)
    with pytest.raises(ArgumentPolicyError, match="unknown hardware id 'tpu-v5e'") as caught:
        check_runnable(recipe)
    assert caught.value.field == "hardware_id"


def test_malformed_hardware_id_is_refused_at_parse() -> None:
    """An id that is not the registry's spelling (spaces, capitals) is refused naming the field."""
    argv = ["vllm", "serve", "org/model"]
    with pytest.raises(RecipeError, match="malformed hardware id") as caught:
        parse_registry(_recipe(hardware_id="RTX 3060 12GB", argv=argv), "r.json")
    assert caught.value.field == "hardware_id"


def test_prose_after_a_fence_line_is_cut() -> None:
    """A command pasted from chat, then a fence line, then the message's prose: the command alone is read, and
    provenance keeps the tokens as the recipe gave them."""
    tokens = ["--model", "org/model", "--max-num-seqs", "8", "```", "My", "command", "is", "pretty", "plain"]
    recipe = parse_registry(_recipe(launch={"kind": "docker", "image": "i:1", "arguments": tokens}), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/model", "--max-num-seqs", "8")
    assert recipe.provenance.source_command == tuple(tokens)


@pytest.mark.parametrize(
    "after",
    [["--max-num-seqs", "8"], ["Then", "add", "--enforce-eager"], ["org/other-model"], ["Config:", "{a:1}"]],
)
def test_a_fence_with_command_text_after_it_is_refused(after: list[str]) -> None:
    """When what follows the fence could be part of the command (an option, a model, JSON), where the command
    ends is unknown: the recipe is refused, naming the fence."""
    tokens = ["vllm", "serve", "org/model", "```", *after]
    with pytest.raises(RecipeError, match="Markdown code fence") as caught:
        parse_registry(_recipe(argv=tokens), "r.json")
    assert caught.value.field == "argv"


@pytest.mark.parametrize(
    "after",
    [
        [],
        ["And", "test", "with", "this:", "```", "wget", "https://example.org/t.py", "-O", "t.py"],
        ["```docker", "run"],
    ],
)
def test_a_fence_glued_to_a_word_ends_the_command(after: list[str]) -> None:
    """ "--port 8000```" closes the code block beyond doubt: the command is what came before, that word without
    its fence; whatever follows (prose, another command) is not read."""
    tokens = ["vllm", "serve", "org/model", "--max-num-seqs", "8```", *after]
    recipe = parse_registry(_recipe(argv=tokens), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/model", "--max-num-seqs", "8")


def test_an_opening_fence_alone_is_still_refused() -> None:
    """A lone opening fence followed by prose holds no command."""
    with pytest.raises(RecipeError, match="Markdown code fence"):
        parse_registry(_recipe(argv=["```", "And", "then", "wait"]), "r.json")


def test_device_pinning_and_cache_paths_are_dropped_tuning_kept() -> None:
    """CUDA_VISIBLE_DEVICES (the worker assigns devices) and LLAMA_CACHE (a path on the author's machine) are
    dropped, each with its reason; B12X_ and CUTE_DSL_ kernel tuning passes."""
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "LLAMA_CACHE": "/home/me/.cache/llama",
        "B12X_MHC_MAX_TOKENS": "16384",
        "CUTE_DSL_ARCH": "sm_120a",
    }
    assert check_recipe_environment(env, "vllm") == {"B12X_MHC_MAX_TOKENS": "16384", "CUTE_DSL_ARCH": "sm_120a"}
    assert set(dropped_names(env)) == {"CUDA_VISIBLE_DEVICES", "LLAMA_CACHE"}


@pytest.mark.parametrize(
    ("name", "value"),
    [("VLLM_MAX_TOKENS_PER_EXPERT", "8"), ("B12X_MHC_MAX_TOKENS", "8"), ("TOKENIZERS_PARALLELISM", "false")],
)
def test_token_counts_are_not_credentials(name: str, value: str) -> None:
    """A variable counting tokens, or the tokenizer's switch, is tuning, not a credential: it reaches the engine."""
    assert check_recipe_environment({name: value}, "vllm") == {name: value}


def test_a_credential_in_a_recipe_is_never_stored() -> None:
    """HUGGING_FACE_HUB_TOKEN in a recipe is dropped from its environment, its value redacted from the source
    command provenance keeps, and its name recorded as dropped; the recipe is not refused for it."""
    metadata = {
        "localmaxxing": {
            "observed_command": "HUGGING_FACE_HUB_TOKEN=hf_secret OMP_NUM_THREADS=4 vllm serve org/model",
            "tokenized": {"environment": {"HF_TOKEN": "hf_other"}},
        }
    }
    recipe = parse_registry(_recipe(metadata=metadata), "r.json")
    assert recipe.environment == {"OMP_NUM_THREADS": "4"}
    assert recipe.provenance.dropped_environment == ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
    stored = recipe.model_dump_json()
    assert "hf_secret" not in stored
    assert "hf_other" not in stored
    check_recipe_for_submit(recipe)


def test_cache_paths_and_offline_switches_are_dropped() -> None:
    """HF_HOME, VLLM_CACHE_ROOT and HF_HUB_OFFLINE say where the author's machine keeps files and whether it
    downloads: the worker decides both, so they are dropped rather than refused."""
    env = {"HF_HOME": "/workspace/.cache/huggingface", "VLLM_CACHE_ROOT": "/cache", "HF_HUB_OFFLINE": "1"}
    assert check_recipe_environment(env, "vllm") == {}
    assert set(dropped_names(env)) == set(env)


def test_shell_quotes_around_a_value_are_removed() -> None:
    """`-e MODE="mtp0"` copied with its quotes means MODE=mtp0, as the shell would pass it; other quotes stay
    and are refused."""
    assert check_recipe_environment({"CUTE_DSL_ARCH": '"sm_120a"'}, "sglang") == {"CUTE_DSL_ARCH": "sm_120a"}
    with pytest.raises(ArgumentPolicyError, match="plain text"):
        check_recipe_environment({"CUTE_DSL_ARCH": '"sm_120a" --x "y"'}, "sglang")


def test_an_sglang_container_launch_is_judged_as_sglang() -> None:
    """A docker launch of SGLang's image is read with SGLang's spec (not as `vllm serve`), and its docker argv
    names the model with SGLang's own option."""
    arguments = ["--model-path", "org/model", "--tp-size", "2", "--host", "0.0.0.0", "--port", "5000"]
    launch = {"kind": "docker", "image": "lmsysorg/sglang:v0.5.2", "arguments": arguments}
    recipe = parse_registry(_recipe(engine={"name": "sglang"}, hardware_count=2, launch=launch), "r.json")
    command = check_recipe_for_submit(recipe)
    assert command.model == "org/model"
    assert recipe.container is not None
    argv = docker_run_argv(
        recipe.container,
        gpus=(0, 1),
        host_port=9000,
        name="farm-test",
        model_cache=None,
        extra_env={},
        policy=replace(DEFAULT_POLICY, allow_image_tags=True),
        engine="sglang",
        device_count=2,
    )
    tail = list(argv[argv.index("lmsysorg/sglang:v0.5.2") + 1 :])
    assert tail == ["--model-path", "org/model", "--tp-size", "2", "--host", "0.0.0.0", "--port", "8000"]


def test_a_flattened_compose_command_list_is_read_as_its_options() -> None:
    """A compose service's `command:` list copied with its `-` markers and followed by the service's container
    keys reads as the listed options; the keys are not arguments."""
    tokens = [
        "--model-path=org/model",
        "-",
        "--tp-size=2",
        "-",
        "--trust-remote-code",
        "-",
        "--mem-fraction-static=0.9",
    ]
    tokens += ["ipc:", "host", "shm_size:", "32g", "```"]
    launch = {"kind": "docker", "image": "lmsysorg/sglang:v0.5.2", "arguments": tokens}
    recipe = parse_registry(_recipe(engine={"name": "sglang"}, hardware_count=2, launch=launch), "r.json")
    assert recipe.argv[3:] == (
        "--model-path=org/model",
        "--tp-size=2",
        "--trust-remote-code",
        "--mem-fraction-static=0.9",
    )


@pytest.mark.parametrize(
    "tail",
    [["entrypoint:", "/bin/sh"], ["command:", "--x"], ["ipc:", "--evil=1"]],
)
def test_a_compose_list_with_anything_else_after_it_is_not_read_as_one(tail: list[str]) -> None:
    """Anything after the list but plain container keys leaves the tokens whole, and the stray `-` markers are
    then refused by the engine's policy."""
    tokens = ["--model-path=org/model", "-", "--tp-size=2", "-", "--trust-remote-code", "-", "--dtype=auto", *tail]
    launch = {"kind": "docker", "image": "lmsysorg/sglang:v0.5.2", "arguments": tokens}
    with pytest.raises(InputError):
        check_recipe_for_submit(
            parse_registry(_recipe(engine={"name": "sglang"}, hardware_count=2, launch=launch), "r.json")
        )


def test_the_official_llama_cpp_image_entrypoint_is_accepted_for_llama_cpp_only() -> None:
    """`/app/llama-server` is the llama.cpp server image's own entrypoint: a llama.cpp container recipe may name
    it; a vLLM one may not."""
    arguments = ["-hf", "org/model-GGUF:Q4_K_M", "--n-gpu-layers", "99", "-c", "2048"]
    draft: dict[str, object] = {
        "kind": "docker",
        "image": "ghcr.io/ggml-org/llama.cpp:server",
        "entrypoint": "/app/llama-server",
    }
    draft["arguments"] = arguments
    launch = {"kind": "reference"}
    recipe = parse_registry(_recipe(engine={"name": "llama.cpp"}, launch=launch, draft_launch=draft), "r.json")
    command = check_recipe_for_submit(recipe)
    assert command.value("--hf-repo") == "org/model-GGUF:Q4_K_M"
    assert recipe.container is not None
    vllm_container = recipe.container.model_copy(update={"arguments": ("org/model",)})
    with pytest.raises(ArgumentPolicyError, match="may not replace the image's entrypoint"):
        check_container_launch(vllm_container, DEFAULT_POLICY, engine="vllm", device_count=1)


def test_nccl_host_memory_switch_is_tuning() -> None:
    """NCCL_CUMEM_HOST_ENABLE is about host memory, not a listening host: it passes; NCCL_SOCKET_IFNAME-like
    address settings still do not."""
    assert check_recipe_environment({"NCCL_CUMEM_HOST_ENABLE": "0"}, "sglang") == {"NCCL_CUMEM_HOST_ENABLE": "0"}
    with pytest.raises(ArgumentPolicyError, match="listens or connects"):
        check_recipe_environment({"NCCL_COMM_HOST": "10.0.0.1"}, "sglang")


def test_prose_after_closing_inline_code_is_cut() -> None:
    """A lone "`" closing inline code, then prose: the command before it is read."""
    tokens = ["--model-path", "org/model", "`", "although", "if", "I", "run", "it", "bare", "it", "fails"]
    launch = {"kind": "docker", "image": "lmsysorg/sglang:v0.5.2", "arguments": tokens}
    recipe = parse_registry(_recipe(engine={"name": "sglang"}, launch=launch), "r.json")
    assert recipe.argv == ("python", "-m", "sglang.launch_server", "--model-path", "org/model")
