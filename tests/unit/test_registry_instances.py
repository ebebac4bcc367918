"""Recipes that name their model by registry instance, by llama-bench, or by a path on the submitter's machine:
each becomes the command that loads the real model, and says in provenance what changed."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from farm.engines.admission import check_recipe_for_submit
from farm.engines.policy import canonical_command
from farm.errors import ArgumentPolicyError, InputError, RecipeError
from farm.recipes import instances
from farm.recipes.instances import Instance
from farm.recipes.parse import parse_registry

BENCH = "llama-bench -m  -p 512 -n 128 -ngl 28 -sm layer -fa on -ctk f16 -ctv f16 -r 5"
GGUF = Instance("org-model-gguf--q4-k-m", "org/Model-GGUF", "a" * 40, "Q4_K_M", "Q4_K_M", "Model-GGUF")
BASE_QUANT = Instance("org-model--q4-k-m", "org/Model", "b" * 40, "Q4_K_M", "Q4_K_M", "Model")
FP8 = Instance("org-model--fp8", "org/Model-FP8", "c" * 40, "FP8", "FP8", "Model-FP8")
MLX = Instance("mlx-community-model-4bit--4bit", "mlx-community/Model-4bit", None, "MLX", "4bit", None)


@pytest.fixture(autouse=True)
def snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot of four instances, in place of the shipped one."""
    known = {instance.id: instance for instance in (GGUF, BASE_QUANT, FP8, MLX)}
    monkeypatch.setattr(instances, "_shipped", lambda: known)


def _recipe(engine: str, instance: str, *, count: int = 1, **changes: Any) -> str:
    document: dict[str, Any] = {
        "schema_version": "local-ai-registry/v1",
        "id": "instance-test",
        "hardware_id": "rtx-3090-24gb",
        "hardware_count": count,
        "engine": {"name": engine},
        "model_instance_id": instance,
        "launch": {"kind": "reference"},
        "metadata": {"localmaxxing": {"observed_command": "", "engine_flags": {"tensorParallel": None}}},
    }
    document.update(changes)
    return json.dumps(document)


def _localmaxxing(observed: str, **extra: Any) -> dict[str, Any]:
    return {"localmaxxing": {"observed_command": observed, **extra}}


def test_a_llama_bench_page_runs_its_model_on_llama_server() -> None:
    """LocalMaxxing records llama.cpp runs as llama-bench commands with the model path hidden: the server loads
    the instance's quantization from its GGUF repository the same way, and provenance says what was dropped."""
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(BENCH)), "r.json")
    assert recipe.argv == (
        "llama-server", "--n-gpu-layers", "28", "--split-mode", "layer", "--flash-attn", "on",
        "--cache-type-k", "f16", "--cache-type-v", "f16", "--hf-repo", "org/Model-GGUF:Q4_K_M",
    )  # fmt: skip
    assert recipe.model_id == "org/Model-GGUF:Q4_K_M"
    notes = " ".join(recipe.provenance.command_notes)
    assert "translated from llama-bench" in notes
    assert "-p 512 -n 128 -r 5" in notes
    assert recipe.provenance.instance_revision == "a" * 40
    assert recipe.provenance.source_command[0] == "llama-bench"
    check_recipe_for_submit(recipe)


def test_a_base_repository_quantization_is_the_hosts_file() -> None:
    """A Q4_K_M of a base (safetensors) repository names no file to download: the command names no model and the
    host maps the instance id to its own GGUF file."""
    recipe = parse_registry(_recipe("llama.cpp", BASE_QUANT.id, metadata=_localmaxxing(BENCH)), "r.json")
    assert "--hf-repo" not in recipe.argv
    assert "--model" not in recipe.argv
    assert recipe.model_id == BASE_QUANT.id
    assert "host maps it" in " ".join(recipe.provenance.command_notes)


def test_a_llama_bench_value_list_is_refused() -> None:
    """llama-bench runs each of several values; a server runs one: refused, naming the field."""
    page = _localmaxxing("llama-bench -m /m.gguf -ngl 28,99")
    with pytest.raises(RecipeError, match="runs each of several values") as caught:
        parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json")
    assert caught.value.field == "metadata.localmaxxing.observed_command"


@pytest.mark.parametrize(
    ("engine", "instance", "argv", "model"),
    [
        ("vllm", FP8.id, ("vllm", "serve", "org/Model-FP8"), "org/Model-FP8"),
        ("llama.cpp", GGUF.id, ("llama-server", "--hf-repo", "org/Model-GGUF:Q4_K_M"), "org/Model-GGUF:Q4_K_M"),
        ("ollama", GGUF.id, ("ollama", "serve"), "hf.co/org/Model-GGUF:Q4_K_M"),
        ("lmstudio", GGUF.id, ("lms", "server", "start"), "org/Model-GGUF:Q4_K_M"),
        ("mlx", MLX.id, ("mlx_lm.server", "--model", "mlx-community/Model-4bit"), "mlx-community/Model-4bit"),
        ("llama.cpp", "unlisted-model-gguf--iq2-xxs", ("llama-server",), "unlisted-model-gguf--iq2-xxs"),
        ("llama.cpp", FP8.id, ("llama-server",), FP8.id),
        ("mlx", BASE_QUANT.id, ("mlx_lm.server",), BASE_QUANT.id),
        ("ollama", "unlisted-model--nvfp4", ("ollama", "serve"), "unlisted-model--nvfp4"),
    ],
)
def test_no_command_is_built_from_the_instance(engine: str, instance: str, argv: tuple[str, ...], model: str) -> None:
    """A run page with no command: engine + the instance's model + engine_flags. A runtime that serves a local
    artifact (llama.cpp, Ollama, LM Studio, MLX) ran one it loads, whatever the instance's label: where the instance
    names no download of it, the host maps the instance id to its own file."""
    recipe = parse_registry(_recipe(engine, instance), "r.json")
    assert recipe.argv == argv
    assert recipe.model_id == model
    assert recipe.provenance.command_source == "engine+model+engine_flags"
    assert recipe.provenance.model_source == "model_instance_id"


@pytest.mark.parametrize(
    ("engine", "instance", "phrase"),
    [
        ("vllm", GGUF.id, "is a GGUF file"),
        ("vllm", BASE_QUANT.id, "is a GGUF file"),
        ("vllm", "unlisted-model--fp8", "snapshot of the registry"),
        ("sglang", "unlisted-model--fp8", "snapshot of the registry"),
    ],
)
def test_an_instance_the_engine_cannot_load_is_refused(engine: str, instance: str, phrase: str) -> None:
    """No guessing: an engine is never handed a model it cannot load, nor one the farm cannot name."""
    with pytest.raises(RecipeError, match=phrase) as caught:
        parse_registry(_recipe(engine, instance), "r.json")
    assert caught.value.field == "model_instance_id"


def test_serving_parallelism_and_context_go_into_a_built_command() -> None:
    """The registry's serving block says how the run was served: its tensor parallel and context length."""
    serving = {"tensor_parallel": 4, "max_context_tokens": 200000, "max_concurrency": 48}
    recipe = parse_registry(_recipe("sglang", FP8.id, count=4, serving=serving), "r.json")
    assert recipe.argv == (
        "python", "-m", "sglang.launch_server", "--model-path", "org/Model-FP8", "--context-length", "200000",
        "--tp-size", "4",
    )  # fmt: skip
    check_recipe_for_submit(recipe)


def test_a_huggingface_cache_path_names_its_repository() -> None:
    """A path into a Hugging Face cache names the repository and file: any host can load that."""
    path = (
        "/home/me/hf/hub/models--AtomicChat--Model-GGUF/snapshots/"
        + "d" * 40
        + "/IQ1_M/Model-IQ1_M-00001-of-00004.gguf"
    )
    page = _localmaxxing("", tokenized={"arguments": ["llama-server", "--model", path, "-ngl", "99"]})
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json")
    assert recipe.argv == (
        "llama-server", "--hf-repo", "AtomicChat/Model-GGUF", "--hf-file", "IQ1_M/Model-IQ1_M-00001-of-00004.gguf",
        "-ngl", "99",
    )  # fmt: skip
    assert "Hugging Face cache of AtomicChat/Model-GGUF" in recipe.provenance.command_notes[0]
    check_recipe_for_submit(recipe)

    page = _localmaxxing(f"vllm serve /root/.cache/huggingface/hub/models--org--Model-FP8/snapshots/{'e' * 40} -tp 2")
    recipe = parse_registry(_recipe("vllm", FP8.id, count=2, metadata=page), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/Model-FP8", "-tp", "2", "--revision", "e" * 40)
    gguf_file = f"/root/.cache/huggingface/hub/models--org--Model-GGUF/snapshots/{'e' * 40}/m-Q4_K_M.gguf"
    recipe = parse_registry(_recipe("vllm", FP8.id, metadata=_localmaxxing(f"vllm serve {gguf_file}")), "r.json")
    assert recipe.argv == ("vllm", "serve", gguf_file)  # one file of a repository: left for the policy to judge


def test_a_local_path_stands_for_the_instance() -> None:
    """The submitter's own path is on no worker: with the recipe's instance known, the model is the instance's."""
    page = _localmaxxing("vllm serve /home/me/models/Model-FP8 --max-model-len 4096")
    recipe = parse_registry(_recipe("vllm", FP8.id, metadata=page), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/Model-FP8", "--max-model-len", "4096")
    assert "/home/me/models/Model-FP8" in recipe.provenance.command_notes[0]

    page = _localmaxxing("llama-server -m /home/me/m.gguf -c 4096")
    recipe = parse_registry(_recipe("llama.cpp", BASE_QUANT.id, metadata=page), "r.json")
    assert recipe.argv == ("llama-server", "-c", "4096")
    assert recipe.model_id == BASE_QUANT.id


def test_a_path_inside_a_container_is_left_to_the_policy() -> None:
    """In a container launch a path names the container's mounts, not the submitter's disk: nothing is replaced."""
    launch = {"kind": "docker", "image": "vllm/vllm-openai@sha256:" + "f" * 64, "arguments": ["/models/x", "-tp", "1"]}
    recipe = parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json")
    assert recipe.argv == ("vllm", "serve", "/models/x", "-tp", "1")
    assert recipe.provenance.command_notes == ()


@pytest.mark.parametrize("value", ["../../etc/passwd", "/etc/passwd", "IQ1_M/../../../root/.ssh/id_rsa", "C:x"])
def test_a_repository_file_never_climbs_out(value: str) -> None:
    """`--hf-file` names a file inside the repository llama.cpp downloads; a value that climbs out of it (or is
    absolute) could write or read anywhere the server's cache path leads: refused, naming the option."""
    with pytest.raises(ArgumentPolicyError, match="a file inside the repository"):
        canonical_command(["llama-server", "--hf-repo", "org/Model-GGUF", "--hf-file", value], "llama.cpp")
    path = "/h/hub/models--org--Model-GGUF/snapshots/" + "d" * 40 + "/../../../../etc/passwd"
    page = _localmaxxing("", tokenized={"arguments": ["llama-server", "--model", path]})
    with pytest.raises(ArgumentPolicyError):
        check_recipe_for_submit(parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json"))


def test_a_flattened_args_list_with_its_env_list() -> None:
    """A container spec's `args:` list copied with a `-` before every item, then its `env:` list: the items are the
    arguments, the env pairs the environment (a device choice among them is the worker's, and dropped there)."""
    tokens = ["-", "--model", "-", "/models/m", "-", "--tensor-parallel-size", "-", "1", "-", "--enforce-eager"]
    env = ["env:", "-", "name:", "VLLM_USE_V1", "value:", '"1"', "```"]
    launch = {"kind": "docker", "image": "vllm/vllm-openai@sha256:" + "f" * 64, "arguments": [*tokens, *env]}
    recipe = parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json")
    assert recipe.argv == ("vllm", "serve", "/models/m", "--tensor-parallel-size", "1", "--enforce-eager")
    assert recipe.environment == {"VLLM_USE_V1": "1"}
    assert recipe.container is not None
    assert recipe.container.arguments[:2] == ("--model", "/models/m")


def test_a_broken_args_list_is_left_to_the_checks() -> None:
    """Anything but a whole `-`-marked list (here a stray word after it) is not reinterpreted: refused, as before,
    now at parse (main's guard on a model that begins with `-`: `--model -` would be read as an option)."""
    tokens = ["-", "--model", "-", "/models/m", "-", "--enforce-eager", "-", "--max-num-seqs", "then", "restart"]
    launch = {"kind": "docker", "image": "vllm/vllm-openai@sha256:" + "f" * 64, "arguments": tokens}
    with pytest.raises(RecipeError, match="begins with '-'"):
        check_recipe_for_submit(parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json"))


def test_llama_bench_lists_and_newer_split_mode() -> None:
    """llama-bench writes one configuration's device and split lists with `/` (a `,` would be several runs);
    llama-server writes them with `,`. `-sm tensor` is llama.cpp's tensor parallelism (ggml-org/llama.cpp#19378)."""
    page = _localmaxxing("llama-bench -m  -dev SYCL0/SYCL1 -sm tensor -ts 1/1 -fa 1", tokenized=None)
    recipe = parse_registry(_recipe("llama.cpp", BASE_QUANT.id, count=2, metadata=page), "r.json")
    command = check_recipe_for_submit(recipe)
    assert command.render_options() == (
        "--device", "SYCL0,SYCL1", "--split-mode", "tensor", "--tensor-split", "1,1", "--flash-attn", "on",
        "--gpu-layers", "99",
    )  # fmt: skip
    with pytest.raises(RecipeError, match="several values"):
        parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing("llama-bench -ts 1/1,2/1")), "r.json")


def test_a_command_on_fewer_devices_than_the_rig() -> None:
    """A recorded command that runs on one of the rig's two cards (`...-tp1` recipes with hardware_count 2): the
    job asks for the one it runs on, and provenance says so. More devices than the recipe has stays refused."""
    page = _localmaxxing("vllm serve org/Model-FP8 --tensor-parallel-size 1")
    recipe = parse_registry(_recipe("vllm", FP8.id, count=2, metadata=page), "r.json")
    assert recipe.hardware_count == 1
    assert "hardware_count is 2" in recipe.provenance.command_notes[-1]
    page = _localmaxxing("vllm serve org/Model-FP8 --tensor-parallel-size 4")
    with pytest.raises(RecipeError, match="runs on 4 device") as caught:
        parse_registry(_recipe("vllm", FP8.id, count=2, metadata=page), "r.json")
    assert caught.value.field == "hardware_count"


def test_an_inferred_rig_takes_the_commands_device_count() -> None:
    """Where the registry inferred the rig (metadata.rig_resolution: the launch did not state its hardware), the
    command's own parallelism is what the recipe says about its devices."""
    page = _localmaxxing("vllm serve org/Model-FP8 -tp 4")
    metadata = {**page, "rig_resolution": {"note": "the launch does not state hardware"}}
    recipe = parse_registry(_recipe("vllm", FP8.id, count=1, metadata=metadata), "r.json")
    assert recipe.hardware_count == 4
    assert "inferred" in recipe.provenance.command_notes[-1]


@pytest.mark.parametrize("executable", ["llama-server.exe", ".\\llama.cpp\\llama-server.exe", "/opt/bin/llama-server"])
def test_windows_executables_and_paths(executable: str) -> None:
    """A Windows command runs llama-server too; its model path (backslashes kept by the token list, lost by a
    POSIX split of the command line) is the submitter's, and stands for the instance."""
    observed = f"{executable} -m C:\\models\\m.gguf -c 4096"
    page = _localmaxxing(observed, tokenized={"arguments": [executable, "-m", "C:\\models\\m.gguf", "-c", "4096"]})
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json")
    assert recipe.argv == ("llama-server", "--hf-repo", "org/Model-GGUF:Q4_K_M", "-c", "4096")
    check_recipe_for_submit(recipe)


def test_a_docker_run_page_is_the_command_the_container_ran() -> None:
    """LocalMaxxing records some runs as the `docker run` of an engine's official image: the engine's arguments
    and -e variables are the command; the model mounted from the submitter's disk stands for the instance."""
    observed = (
        "docker run --gpus all --ipc=host -e CUTE_DSL_ARCH=sm_120a -v <MODEL_DIR>:/model:ro "
        "vllm/vllm-openai:<nightly> --model /model --tensor-parallel-size 1 --max-model-len 4096"
    )
    recipe = parse_registry(_recipe("vllm", FP8.id, metadata=_localmaxxing(observed)), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/Model-FP8", "--tensor-parallel-size", "1", "--max-model-len", "4096")
    assert recipe.environment == {"CUTE_DSL_ARCH": "sm_120a"}
    assert "docker run of vllm/vllm-openai" in recipe.provenance.command_notes[0]
    check_recipe_for_submit(recipe)


@pytest.mark.parametrize(
    ("observed", "phrase"),
    [
        ("docker run --entrypoint /bin/sh vllm/vllm-openai:v1 -c id", "replaces the image's entrypoint"),
        ("docker run --env-file .env vllm/vllm-openai:v1 --model org/m", "a file the recipe does not carry"),
        ("docker run evil/image:1 --model org/m", "not vllm's official image"),
        ("docker run --gpus all", "without an image"),
    ],
)
def test_a_docker_run_the_farm_cannot_judge_is_refused(observed: str, phrase: str) -> None:
    """Nothing a docker run adds beyond the engine's own arguments is taken on trust."""
    with pytest.raises(RecipeError, match=phrase) as caught:
        parse_registry(_recipe("vllm", FP8.id, metadata=_localmaxxing(observed)), "r.json")
    assert caught.value.field == "metadata.localmaxxing.observed_command"


def test_lm_studio_start_and_load_steps() -> None:
    """`lms server start ... && lms load MODEL ...`: the token list keeps the load step, which names the model and
    how it is loaded; the server's own port and bind address are the worker's."""
    observed = "lms server start --port 1234 --bind 127.0.0.1 && lms load org-model --context-length 8192 --yes"
    page = _localmaxxing(
        observed, tokenized={"arguments": ["lms", "load", "org-model", "--context-length", "8192", "--yes"]}
    )
    recipe = parse_registry(_recipe("lmstudio", GGUF.id, metadata=page), "r.json")
    assert recipe.argv == ("lms", "server", "start", "org-model", "--context-length", "8192", "--yes")
    assert recipe.provenance.command_source == "metadata.localmaxxing.tokenized.arguments"
    check_recipe_for_submit(recipe)


def test_sglang_serve_in_a_compose_launch() -> None:
    """`sglang serve` is SGLang's own CLI for the same server. A docker-compose launch's file is not carried, so
    no container is built from it: its command runs as a process, where the container path it names stands for
    the recipe's instance."""
    launch = {
        "kind": "docker-compose",
        "compose": {"file": "c.yaml"},
        "arguments": ["sglang", "serve", "--model-path", "/model", "--tp-size", "1"],
    }
    recipe = parse_registry(_recipe("sglang", FP8.id, launch=launch), "r.json")
    assert recipe.argv == ("python", "-m", "sglang.launch_server", "--model-path", "org/Model-FP8", "--tp-size", "1")
    assert recipe.container is None
    check_recipe_for_submit(recipe)


def test_a_recorded_line_of_several_commands_reads_the_server() -> None:
    """`llama-server ... -a name; bench.py --max-tokens 256`: the server step alone is the command (the rest is the
    submitter's benchmark, which the farm's sweep replaces), and provenance says what was left out."""
    observed = "llama-server -m m.gguf -ngl 99 -a served-name; bench.py --max-tokens 256 --ignore-eos"
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)), "r.json")
    assert recipe.argv == ("llama-server", "-m", "m.gguf", "-ngl", "99", "-a", "served-name")
    assert "left out: bench.py --max-tokens 256 --ignore-eos" in recipe.provenance.command_notes[0]
    two_servers = "vllm serve org/a && vllm serve org/b"
    with pytest.raises(RecipeError):
        parse_registry(_recipe("vllm", FP8.id, metadata=_localmaxxing(two_servers)), "r.json")


def test_a_recorded_note_falls_back_to_the_draft_launch() -> None:
    """A recorded 'command' that serves nothing (a description of the benchmark) is not the run's command: the
    registry's draft launch says how to serve the model, and provenance keeps what was recorded and why."""
    draft = {"kind": "reference", "entrypoint": "/app/llama-server", "arguments": ["-hf", "org/Model-GGUF:Q4_K_M"]}
    page = _localmaxxing("llama.cpp GGUF five-prompt benchmark")
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page, draft_launch=draft), "r.json")
    assert recipe.argv == ("llama-server", "-hf", "org/Model-GGUF:Q4_K_M")
    assert recipe.provenance.command_source == "draft_launch.arguments"
    assert "serves nothing the farm runs" in recipe.provenance.command_notes[-1]
    with pytest.raises(RecipeError, match="is the engine's name, not an executable") as caught:
        parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json")
    assert caught.value.field == "metadata.localmaxxing.observed_command"


def test_paths_in_a_container_launch_name_its_mounts() -> None:
    """In a container launch `/model` is the container's mount, judged as such (its source is the host's to
    allow); the same path run as a process on the host is outside the host's roots."""
    image = "vllm/vllm-openai@sha256:" + "f" * 64
    mounts = [{"source": "/srv/models/m", "target": "/model", "read_only": True}]
    launch = {"kind": "docker", "image": image, "arguments": ["--model", "/model", "-tp", "1"], "mounts": mounts}
    recipe = parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json")
    check_recipe_for_submit(recipe)
    from farm.engines.policy import DEFAULT_POLICY, recipe_command

    with pytest.raises(ArgumentPolicyError, match="outside this host's model and cache roots"):
        recipe_command(recipe, DEFAULT_POLICY)


def test_a_wrapped_server_command_is_not_swapped_for_the_draft() -> None:
    """`nohup vllm serve ...` names an engine: it is a command the farm cannot read, refused as such, never
    replaced by the registry's shorter draft."""
    draft = {"kind": "reference", "entrypoint": "vllm", "arguments": ["serve", "--model", "org/Model-FP8"]}
    page = _localmaxxing("nohup vllm serve org/Model-FP8 --max-model-len 131072 > log 2>&1")
    with pytest.raises(RecipeError, match="not a known engine's server"):
        parse_registry(_recipe("vllm", FP8.id, metadata=page, draft_launch=draft), "r.json")


@pytest.mark.parametrize("observed", ["GGML_X=1", "env", "FOO=1; llama-server -m /models/x.gguf", "A=1 && B=2"])
def test_environment_only_steps_are_input_errors(observed: str) -> None:
    """A recorded line (or a step of it) that is only environment words is read or refused with a reason, never a
    crash (IndexError before this was fixed)."""
    outcome = _outcome(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)))
    assert outcome == "ok" or outcome.startswith("refused: ")


def _outcome(document: str) -> str:
    try:
        check_recipe_for_submit(parse_registry(document, "r.json"))
    except InputError as exc:
        return f"refused: {exc.detail}"
    return "ok"


def test_notes_survive_the_recorded_environment() -> None:
    """A llama-bench page with environment words keeps its translation note (and the words go to the environment)."""
    page = {
        "localmaxxing": {
            "observed_command": "",
            "tokenized": {"arguments": BENCH.split(), "environment": {"GGML_CUDA_NO_PINNED": "1"}},
        }
    }
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json")
    assert recipe.environment == {"GGML_CUDA_NO_PINNED": "1"}
    assert any("translated from llama-bench" in note for note in recipe.provenance.command_notes)


@pytest.mark.parametrize(
    "secret_tokens",
    [
        ["docker", "run", "--env=HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz", "vllm/vllm-openai:v1", "--model", "org/m"],
        ["docker", "run", "-e", "X=hf_abcdefghijklmnopqrstuvwxyz", "vllm/vllm-openai:v1", "--model", "org/m"],
    ],
)
def test_no_credential_reaches_provenance(secret_tokens: list[str]) -> None:
    """Credentials are redacted from the recorded command provenance keeps, in every spelling."""
    page = _localmaxxing(" ".join(secret_tokens), tokenized={"arguments": secret_tokens})
    recipe = parse_registry(_recipe("vllm", FP8.id, metadata=page), "r.json")
    assert not any("hf_abcdefghijklmnopqrstuvwxyz" in token for token in recipe.provenance.source_command)
    tokens = ["-", "--model", "-", "org/m", "-", "--enforce-eager", "env:", "-", "name:", "HF_TOKEN", "value:", "abc"]
    launch = {"kind": "docker", "image": "vllm/vllm-openai@sha256:" + "f" * 64, "arguments": tokens}
    recipe = parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json")
    assert "abc" not in recipe.provenance.source_command
    assert "HF_TOKEN" not in recipe.environment


def test_a_docker_launch_runs_the_recorded_command() -> None:
    """Where the command comes from the recorded line and the image from a docker launch with other arguments,
    the container runs the recorded (judged) command."""
    image = "vllm/vllm-openai@sha256:" + "f" * 64
    launch = {"kind": "docker", "image": image, "arguments": ["--model", "org/OTHER", "--enforce-eager"]}
    page = _localmaxxing("vllm serve org/Model-FP8 --max-model-len 4096")
    recipe = parse_registry(_recipe("vllm", FP8.id, metadata=page, launch=launch), "r.json")
    assert recipe.container is not None
    assert recipe.container.arguments == ("org/Model-FP8", "--max-model-len", "4096")


def test_a_synthesized_draft_says_nothing_of_the_devices() -> None:
    """The registry's synthesized draft without a tensor-parallel option on two devices is no statement that the
    run used one; and an inferred rig is never taken past one host's eight devices."""
    draft = {
        "kind": "reference",
        "entrypoint": "vllm",
        "arguments": ["serve", "--model", "org/Model-FP8"],
        "synthesized": {"t": 1},
    }
    with pytest.raises(RecipeError, match="runs on 1 device"):
        parse_registry(_recipe("vllm", FP8.id, count=2, draft_launch=draft), "r.json")
    metadata = {**_localmaxxing("vllm serve org/Model-FP8 -tp 16"), "rig_resolution": {"note": "inferred"}}
    with pytest.raises(RecipeError, match="runs on 16 device"):
        parse_registry(_recipe("vllm", FP8.id, count=1, metadata=metadata), "r.json")


def test_a_docker_run_of_another_engines_image_is_refused() -> None:
    """A docker run is read only as the official server image of the recipe's own engine."""
    observed = "docker run vllm/vllm-openai:v1 --model org/m"
    with pytest.raises(RecipeError, match=r"runs vllm, not the recipe's engine llama\.cpp"):
        parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)), "r.json")
    observed = "docker run ghcr.io/ggml-org/llama.cpp:light -m /models/m.gguf"
    with pytest.raises(RecipeError, match=r"not llama\.cpp's official image"):
        parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)), "r.json")


def test_a_loader_variable_is_refused() -> None:
    """Level Zero's ZE_ENABLE_ALT_DRIVERS loads any shared library: not a tuning variable."""
    observed = "ZE_ENABLE_ALT_DRIVERS=/models/evil.so llama-server -m /models/m.gguf"
    with pytest.raises(ArgumentPolicyError, match="ZE_ENABLE_ALT_DRIVERS"):
        check_recipe_for_submit(parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)), "r"))


def test_an_official_image_without_arguments_runs_the_instance() -> None:
    """A docker launch of the engine's official image with no arguments shows no command (the image's default names
    no model): nothing else is given, so the command is engine + instance + serving, noted; the image runs it."""
    launch = {"kind": "docker", "image": "vllm/vllm-openai:v0.25.1"}
    serving = {"tensor_parallel": 2, "max_context_tokens": 65536}
    recipe = parse_registry(_recipe("vllm", FP8.id, count=2, launch=launch, serving=serving), "r.json")
    assert recipe.argv == (
        "vllm", "serve", "org/Model-FP8", "--max-model-len", "65536", "--tensor-parallel-size", "2",
    )  # fmt: skip
    assert recipe.provenance.command_source == "engine+model+engine_flags"
    assert any(
        "docker launch of vllm/vllm-openai:v0.25.1 without arguments" in n for n in recipe.provenance.command_notes
    )
    assert recipe.container is not None
    assert recipe.container.arguments == recipe.argv[2:]
    check_recipe_for_submit(recipe)


@pytest.mark.parametrize(
    ("launch", "phrase"),
    [
        ({"kind": "docker", "image": "ghcr.io/someone/custom:1"}, "not vllm's official image"),
        ({"kind": "docker", "image": "vllm/vllm-openai:v1", "entrypoint": "/run.sh"}, "with its own entrypoint"),
        ({"kind": "docker", "image": "lmsysorg/sglang:v0.5"}, "not vllm's official image"),
    ],
)
def test_a_container_without_arguments_that_runs_its_own_command_is_refused(
    launch: dict[str, str], phrase: str
) -> None:
    with pytest.raises(RecipeError, match=re.escape(phrase)) as caught:
        parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json")
    assert caught.value.field == "launch.arguments"


def test_a_script_or_compose_launch_without_arguments_is_refused() -> None:
    """The command of a script or compose launch lives in a file the recipe does not carry, with settings (its
    environment template, its image) an engine-and-model command would not reproduce: refused, naming the file."""
    for launch in (
        {"kind": "script", "script": {"file": "start.sh"}},
        {"kind": "docker-compose", "compose": {"file": "c.yml"}},
    ):
        with pytest.raises(
            RecipeError, match=r"launch without arguments: its command lives in '(start\.sh|c\.yml)'"
        ) as caught:
            parse_registry(_recipe("vllm", FP8.id, launch=launch), "r.json")
        assert caught.value.field == "launch.arguments"


def test_an_official_image_the_farm_cannot_fill_keeps_its_reason() -> None:
    """No arguments and an instance the snapshot lacks: the refusal says both."""
    launch = {"kind": "docker", "image": "vllm/vllm-openai:v1"}
    with pytest.raises(RecipeError, match=r"names no model of the recipe's; nor can the farm") as caught:
        parse_registry(_recipe("vllm", "org-unknown--fp8", launch=launch), "r.json")
    assert caught.value.field == "launch.arguments"


def test_sglang_data_parallel_attention_shares_the_tensor_parallel_devices() -> None:
    """With --enable-dp-attention SGLang's --dp ranks run inside the --tp devices: two devices, not four."""
    observed = "python -m sglang.launch_server --model-path org/Model-FP8 --tp 2 --dp 2 --enable-dp-attention"
    recipe = parse_registry(_recipe("sglang", FP8.id, count=2, metadata=_localmaxxing(observed)), "r.json")
    assert recipe.hardware_count == 2
    check_recipe_for_submit(recipe)
    with pytest.raises(RecipeError, match="runs on 4 device"):
        parse_registry(_recipe("sglang", FP8.id, count=2, metadata=_localmaxxing(observed.rsplit(" ", 1)[0])), "r")


@pytest.mark.parametrize(
    "draft",
    ["/home/me/models/d-Q4_K_M.gguf", "drafts/d-Q4_K_M.gguf", "C:\\models\\d-Q4_K_M.gguf", "d-Q4_K_M.gguf"],
)
def test_a_draft_file_on_the_submitters_machine_is_named_by_its_file(draft: str) -> None:
    """llama.cpp's draft model, a file on the submitter's disk, is named by its file name (which the host maps,
    as it maps the main model), noted; a bare file name stays as written."""
    observed = f"llama-server -m /home/me/m.gguf -md {shlex.quote(draft)} --spec-type draft-dflash"
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)), "r.json")
    assert recipe.argv[recipe.argv.index("-md") + 1] == "d-Q4_K_M.gguf"
    notes = " ".join(recipe.provenance.command_notes)
    assert ("the host maps its name 'd-Q4_K_M.gguf'" in notes) is (draft != "d-Q4_K_M.gguf")
    check_recipe_for_submit(recipe)


def test_the_registrys_production_check_names_a_missing_instances_repository() -> None:
    """For an instance the snapshot lacks, the repository the registry's production check pinned
    (metadata.prod_checks.source) is the model; the serving block's memory fraction is carried too."""
    checked = "https://huggingface.co/api/models/openai/gpt-oss-120b/revision/" + "b" * 40 + "?blobs=true"
    metadata = {"prod_checks": {"source": checked, "revision": "b" * 40}}
    serving = {"tensor_parallel": 1, "gpu_memory_utilization": 0.8}
    recipe = parse_registry(_recipe("vllm", "openai-gpt-oss-120b--mxfp4", metadata=metadata, serving=serving), "r.json")
    assert recipe.argv == ("vllm", "serve", "openai/gpt-oss-120b", "--gpu-memory-utilization", "0.8")
    sglang = parse_registry(_recipe("sglang", FP8.id, serving={"gpu_memory_utilization": 0.85}), "r.json")
    assert sglang.argv[-2:] == ("--mem-fraction-static", "0.85")
    for source in ("https://evil.example/api/models/a/b/revision/" + "b" * 40, "openai/gpt-oss-120b"):
        with pytest.raises(RecipeError, match="lacks") as caught:
            parse_registry(_recipe("vllm", "x--y", metadata={"prod_checks": {"source": source}}), "r.json")
        assert caught.value.field == "model_instance_id"
    with pytest.raises(RecipeError, match="expected a positive number") as caught:
        parse_registry(_recipe("vllm", FP8.id, serving={"gpu_memory_utilization": "most"}), "r.json")
    assert caught.value.field == "serving.gpu_memory_utilization"


def test_an_official_image_without_arguments_runs_in_that_image_not_a_drafts() -> None:
    """The built command runs in the launch's own (official) image, even where a docker draft names another."""
    launch = {"kind": "docker", "image": "vllm/vllm-openai:v0.25.1"}
    draft = {"kind": "docker", "image": "ghcr.io/someone/custom@sha256:" + "c" * 64}
    recipe = parse_registry(_recipe("vllm", FP8.id, launch=launch, draft_launch=draft), "r.json")
    assert recipe.container is not None
    assert recipe.container.image == "vllm/vllm-openai:v0.25.1"


@pytest.mark.parametrize("placeholder", ["<MODEL.gguf>", "<path-to-gguf>", "$MODEL", "${MODEL_PATH}"])
def test_a_placeholder_model_is_the_recipes_instance(placeholder: str) -> None:
    """A template's blank for the model (`-m <MODEL.gguf>`, `$MODEL`) means the recipe's own model: its instance."""
    observed = f"llama-server -m {shlex.quote(placeholder)} -c 4096"
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=_localmaxxing(observed)), "r.json")
    assert recipe.argv == ("llama-server", "--hf-repo", "org/Model-GGUF:Q4_K_M", "-c", "4096")
    assert any(f"the placeholder {placeholder!r} stands for" in note for note in recipe.provenance.command_notes)
    vllm = parse_registry(_recipe("vllm", FP8.id, metadata=_localmaxxing(f"vllm serve {placeholder}")), "r.json")
    assert vllm.argv == ("vllm", "serve", "org/Model-FP8")


def test_a_recorded_line_of_options_alone_is_the_engines_server() -> None:
    """A page that recorded only the options it added runs the recipe's engine with them, on its instance."""
    page = _localmaxxing(
        "-b 1024 -ub 1024 --cache-type-k q8_0",
        tokenized={"arguments": ["-b", "1024", "-ub", "1024", "--cache-type-k", "q8_0"]},
    )
    recipe = parse_registry(_recipe("llama.cpp", GGUF.id, metadata=page), "r.json")
    assert recipe.argv == (
        "llama-server",
        "-b",
        "1024",
        "-ub",
        "1024",
        "--cache-type-k",
        "q8_0",
        "--hf-repo",
        "org/Model-GGUF:Q4_K_M",
    )
    assert any("holds only options" in note for note in recipe.provenance.command_notes)
    check_recipe_for_submit(recipe)


def test_the_registrys_credits_name_a_missing_instances_checkpoint_when_the_instance_id_agrees() -> None:
    """The checkpoint the registry's credits link (metadata.credits) is the model of an instance the snapshot lacks,
    but only where the instance id names that repository: a credit for another component is not the model."""
    credits = [
        {"role": "Kernels", "url": "https://huggingface.co/someone/other-model"},
        {
            "role": "Checkpoint publisher or upstream component author",
            "url": "https://huggingface.co/Org/GLM-5.2-NVFP4",
        },
    ]
    metadata = {"credits": credits}
    document = _recipe(
        "vllm", "lil-org-glm-5-2-nvfp4--unpinned", count=8, metadata=metadata, serving={"tensor_parallel": 8}
    )
    recipe = parse_registry(document, "r.json")
    assert recipe.argv == ("vllm", "serve", "Org/GLM-5.2-NVFP4", "--tensor-parallel-size", "8")
    with pytest.raises(RecipeError, match="lacks") as caught:
        parse_registry(_recipe("vllm", "lil-org-glm-6--unpinned", metadata={"credits": credits}), "r.json")
    assert caught.value.field == "model_instance_id"
