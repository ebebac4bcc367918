"""Every shape of command the registry writes is read into one canonical argv, and real registry recipes
(tests/fixtures/registry) are accepted or refused as expected, each refusal naming its field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from farm.cli.app import app
from farm.engines.admission import check_recipe_for_submit
from farm.errors import RecipeError
from farm.recipes import assets
from farm.recipes.parse import load_recipe, parse_registry

REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "registry"
EXPECTED: dict[str, str | None] = json.loads((REGISTRY / "expected.json").read_text())
SPEC = '{"method":"dspark","num_speculative_tokens":5}'


def _recipe(**changes: Any) -> str:
    """A registry recipe on one H200 with the given fields; `None` drops a field."""
    document: dict[str, Any] = {
        "schema_version": "local-ai-registry/v1",
        "id": "shape-test",
        "hardware_id": "h200-141gb",
        "hardware_count": 1,
        "engine": {"name": "vllm"},
        "model_instance_id": "org-model--fp8",
    }
    document.update(changes)
    return json.dumps({key: value for key, value in document.items() if value is not None})


def _localmaxxing(observed: str | None = None, arguments: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    section: dict[str, Any] = {"observed_command": observed, **extra}
    if arguments is not None:
        section["tokenized"] = {"arguments": arguments, "fidelity": "faithful"}
    return {"localmaxxing": section}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_registry_recipe(name: str) -> None:
    """Each real recipe is accepted, or refused naming the field the expectation lists."""
    path = REGISTRY / name
    field = EXPECTED[name]
    if field is None:
        recipe = load_recipe(path)
        assert recipe.argv[: len(recipe.launcher)] == recipe.launcher
        assert "=" not in recipe.argv[0]
        return
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{path}: field {field!r}: ")


def test_every_registry_fixture_has_an_expectation() -> None:
    """No real recipe goes untested."""
    names = {path.name for path in REGISTRY.glob("*.json")} - {"expected.json", "canonical.json"}
    assert names == set(EXPECTED)


@pytest.mark.parametrize(
    ("spelling", "engine"),
    [("vLLM", "vllm"), (" VLLM ", "vllm"), ("llama-cpp", "llama.cpp"), ("LM-Studio", "lmstudio"), ("MLX", "mlx")],
)
def test_engine_names_ignore_case_and_know_aliases(spelling: str, engine: str) -> None:
    """Engine names are matched without regard to case, with the registry's aliases."""
    commands = {
        "vllm": ["vllm", "serve", "org/model"],
        "llama.cpp": ["llama-server", "-m", "/models/m.gguf"],
        "lmstudio": ["lms", "server", "start"],
        "mlx": ["mlx_lm.server", "--model", "mlx-community/m"],
    }
    recipe = parse_registry(_recipe(engine={"name": spelling}, argv=commands[engine]), "r.json")
    assert recipe.engine.name == engine


def test_python_module_vllm_is_vllm_serve() -> None:
    """`python -m vllm.entrypoints.openai.api_server --model M` is `vllm serve M`."""
    argv = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/model", "--max-model-len", "4096"]
    recipe = parse_registry(_recipe(argv=argv), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/model", "--max-model-len", "4096")
    assert recipe.provenance.source_command == tuple(argv)
    assert recipe.engine_args == ("--max-model-len", "4096")


def test_sglang_launch_server() -> None:
    """SGLang's `python -m sglang.launch_server` is read with its --model-path and --tp-size."""
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "org/model", "--tp-size", "2"]
    recipe = parse_registry(_recipe(engine={"name": "sglang"}, hardware_count=2, argv=argv), "r.json")
    assert recipe.argv == tuple(argv)
    assert recipe.model_id == "org/model"
    with pytest.raises(RecipeError, match="runs on 2 device"):
        parse_registry(_recipe(engine={"name": "sglang"}, argv=argv), "r.json")


def test_leading_environment_words_go_to_the_environment() -> None:
    """`VAR=value vllm serve ...` puts VAR in recipe.environment, never in the argv."""
    observed = "VLLM_USE_V1=1 HF_HUB_OFFLINE=1 vllm serve org/model"
    recipe = parse_registry(_recipe(metadata=_localmaxxing(observed)), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/model")
    assert recipe.environment == {"VLLM_USE_V1": "1", "HF_HUB_OFFLINE": "1"}
    assert recipe.provenance.command_source == "metadata.localmaxxing.observed_command"


def test_valid_json_beats_stripped_json() -> None:
    """Where the token list lost a JSON value's quotes and the observed command kept them, the observed
    command is used, and provenance says so."""
    observed = f"vllm serve org/model --speculative-config '{SPEC}'"
    stripped = ["vllm", "serve", "org/model", "--speculative-config", "{method:dspark,num_speculative_tokens:5}"]
    recipe = parse_registry(_recipe(metadata=_localmaxxing(observed, stripped)), "r.json")
    assert recipe.argv[-1] == SPEC
    assert json.loads(recipe.argv[-1])["num_speculative_tokens"] == 5
    assert recipe.provenance.command_source == "metadata.localmaxxing.observed_command"


def test_stripped_json_everywhere_is_refused() -> None:
    """No source keeps the JSON valid and the stripped text has no single reading (a key twice): refused, naming
    the token, rather than launched without its quotes. (One with a single reading is repaired:
    test_registry_pastes.)"""
    stripped = ["vllm", "serve", "org/model", "--speculative-config", "{method:dspark,method:mtp}"]
    with pytest.raises(RecipeError, match=r"token 4 .* not valid JSON") as caught:
        parse_registry(_recipe(metadata=_localmaxxing(" ".join(stripped), stripped)), "r.json")
    assert caught.value.field == "metadata.localmaxxing.tokenized.arguments"


def test_draft_launch_with_serve_gets_one_serve() -> None:
    """Draft arguments that already start with `serve` (entrypoint `vllm`) give one `serve`, not two."""
    draft = {
        "kind": "docker",
        "image": "vllm/vllm-openai@sha256:" + "0" * 64,
        "entrypoint": "vllm",
        "arguments": ["serve", "--model", "org/model", "--max-model-len", "8192"],
    }
    recipe = parse_registry(_recipe(draft_launch=draft), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/model", "--max-model-len", "8192")
    assert recipe.argv.count("serve") == 1
    assert recipe.provenance.command_source == "draft_launch.arguments"


def test_placeholder_observed_command_falls_through_to_draft_launch() -> None:
    """`# Remote endpoint: ...` is a note, not a command: the draft launch is used."""
    draft = {"kind": "docker", "image": "vllm/vllm-openai:v0.11.0", "arguments": ["--model", "org/model"]}
    metadata = _localmaxxing("# Remote endpoint: http://127.0.0.1:8000  servedModel: model")
    recipe = parse_registry(_recipe(metadata=metadata, draft_launch=draft), "r.json")
    assert recipe.argv == ("vllm", "serve", "org/model")
    assert recipe.container is not None


def test_docker_launch_arguments() -> None:
    """A docker launch's arguments (no executable) run the declared engine in the launch's image."""
    launch = {
        "kind": "docker",
        "image": "lmsysorg/sglang@sha256:" + "1" * 64,
        "arguments": ["--model-path", "org/model", "--tp", "2"],
        "environment": {"NCCL_P2P_DISABLE": "1"},
    }
    recipe = parse_registry(_recipe(engine={"name": "sglang"}, hardware_count=2, launch=launch), "r.json")
    assert recipe.argv == ("python", "-m", "sglang.launch_server", "--model-path", "org/model", "--tp", "2")
    assert recipe.container is not None
    assert recipe.container.environment == {"NCCL_P2P_DISABLE": "1"}
    assert recipe.environment == {}


def test_engine_model_and_flags() -> None:
    """Nothing but engine, model repository and engine_flags: the command is built from them."""
    flags = {"gpuLayers": 99, "flashAttn": True, "kvCacheDtype": "q8_0", "tensorParallel": None, "specDecoding": False}
    document = _recipe(
        engine={"name": "llama-cpp"},
        huggingface={"repository": "unsloth/Model-GGUF", "status": "known"},
        metadata=_localmaxxing("", engine_flags=flags),
        launch={"kind": "reference"},
    )
    recipe = parse_registry(document, "r.json")
    assert recipe.argv == (
        "llama-server", "--hf-repo", "unsloth/Model-GGUF", "--n-gpu-layers", "99", "--flash-attn", "on",
        "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
    )  # fmt: skip
    assert recipe.provenance.command_source == "engine+model+engine_flags"
    assert recipe.provenance.model_source == "huggingface.repository"


UPSTREAM = "https://github.com/local-inference-lab/blackwell-llm-docker/blob/0123abc/examples/compose-ds4.yml"


@pytest.mark.parametrize("reason", ["upstream-reference-not-a-launch-contract", "reference-only-launch"])
def test_a_reference_the_registry_marks_not_a_launch_contract_is_no_command(reason: str) -> None:
    """The registry marks a reference to an upstream launcher (a compose file, a serve script in a custom image)
    as not a launch contract: the run used that launcher's own settings, so no command is built from the engine
    and the model, and the refusal names the launcher and its settings. The same recipe with a plain reference is
    built from its model (the control)."""
    launch = {"kind": "reference", "url": UPSTREAM, "container": {"reason": reason, "state": "none"}}
    defaults = {"TP_SIZE": "2", "MTP": "3", "MOE_MODE": "a16"}
    document = _recipe(
        model_instance_id=None,
        huggingface={"repository": "deepseek-ai/DeepSeek-V4-Flash", "status": "known"},
        serving={"tensor_parallel": 2},
        hardware_count=2,
        launch=launch,
        metadata={"upstream_defaults": defaults},
    )
    if reason == "reference-only-launch":
        recipe = parse_registry(document, "r.json")
        assert recipe.argv == ("vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash", "--tensor-parallel-size", "2")
        return
    with pytest.raises(RecipeError) as caught:
        parse_registry(document, "r.json")
    assert caught.value.field == "launch.container.reason"
    assert UPSTREAM in caught.value.detail
    assert "with its settings MOE_MODE=a16, MTP=3, TP_SIZE=2" in caught.value.detail


def test_an_instance_the_snapshot_lacks_is_no_command_for_vllm() -> None:
    """A registry instance id is not a repository vLLM can load: without the instance's document in the farm's
    snapshot there is no command, said plainly."""
    with pytest.raises(RecipeError, match="vllm needs the repository of instance 'org-model--fp8'") as caught:
        parse_registry(_recipe(metadata=_localmaxxing("# Remote endpoint: http://x:1")), "r.json")
    assert caught.value.field == "model_instance_id"


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (
            ["vllm", "serve", "evil/model", "--model", "good/model"],
            "positional model 'evil/model' and --model 'good/model' disagree",
        ),
        (["vllm", "serve", "--model", "a/b", "--model=c/d"], "more than once"),
        (["vllm", "serve", "serve", "a/b"], "two arguments before the first option"),
        (["llama-bench", "-m", "/m.gguf"], "benchmark tool, not a server"),
        (["python", "-m", "evil.module"], "no engine's server"),
        (["vllm", "serve", "a/b", "--x", ""], "token 4 is empty"),
    ],
)
def test_commands_refused(argv: list[str], phrase: str) -> None:
    """Commands that do not mean one server with one model are refused, naming the argv."""
    with pytest.raises(RecipeError, match=phrase) as caught:
        parse_registry(_recipe(argv=argv), "r.json")
    assert caught.value.field == "argv"


def test_container_entrypoint_must_be_the_engine() -> None:
    """A container whose entrypoint is some script runs something the farm cannot judge: refused."""
    launch = {"kind": "docker", "image": "x/y:1", "entrypoint": "/serve.sh", "arguments": ["--model", "a/b"]}
    with pytest.raises(RecipeError, match=r"entrypoint '/serve\.sh' is not vllm's server") as caught:
        parse_registry(_recipe(launch=launch), "r.json")
    assert caught.value.field == "launch.entrypoint"


def test_recipe_check_goes_on_past_bad_files(tmp_path: Path) -> None:
    """`farm recipe check A B C`: a bad B does not stop C; the exit status is non-zero; no traceback."""
    good = REGISTRY / "deepseek-v4-flash-0731-fp8-e4m3-rtx-pro-6000-blackwell-96gb-vllm-tp2.json"
    bad = tmp_path / "deep.json"
    bad.write_text("[" * 100_000)
    result = CliRunner().invoke(
        app, ["recipe", "check", "--summary", str(bad), str(tmp_path / "missing.json"), str(good)]
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.count("FAIL") == 2
    assert f"ok     {good}" in result.output
    assert "1 of 3 accepted" in result.output


def test_benchmark_tool_falls_back_to_the_draft_launch() -> None:
    """A run measured with llama-bench in a form the farm cannot translate, whose record carries the author's own
    llama-server launch (not one the registry synthesized): that launch is the command; without a draft, the
    benchmark tool is refused. (A synthesized draft never replaces the recording: test_registry_faithful.)"""
    draft = {"kind": "reference", "arguments": ["-hf", "org/Model-GGUF:Q4_K_M", "-c", "4096"]}
    recipe = parse_registry(
        _recipe(
            engine={"name": "llama.cpp"},
            model_instance_id="org-model-gguf--q4-k-m",
            metadata=_localmaxxing("llama-bench -m /m.gguf -lm none -p 512"),
            draft_launch=draft,
        ),
        "r.json",
    )
    assert recipe.argv[0] == "llama-server"
    assert recipe.provenance.command_source == "draft_launch.arguments"
    assert recipe.model_id == "org/Model-GGUF:Q4_K_M"
    assert recipe.serving.max_context_tokens == 4096
    with pytest.raises(RecipeError, match="benchmark tool, not a server"):
        parse_registry(_recipe(engine={"name": "llama.cpp"}, argv=["llama-bench", "-m", "/m.gguf"]), "r.json")


def test_unquoted_json_in_an_observed_command_stays_json() -> None:
    """`--speculative-config {"method":"mtp"}` pasted without shell quotes means that JSON; a shell split
    would strip its quotes (how the registry's token lists lost them), so the farm keeps it whole. The real
    record: python -m vllm...api_server, a stripped token list, and an observed command with the JSON."""
    recipe = load_recipe(REGISTRY / "deepseek-v4-flash-fp8-dgx-spark-gb10-128gb-vllm-tp1-nzqc7c66.json")
    assert recipe.argv[:3] == ("vllm", "serve", "0xSero/DeepSeek-V4-Flash-180B")
    assert json.loads(recipe.argv[-1]) == {"method": "deepseek_mtp", "num_speculative_tokens": 2}
    assert recipe.provenance.command_source == "metadata.localmaxxing.observed_command"
    assert recipe.provenance.source_command[:3] == ("python", "-m", "vllm.entrypoints.openai.api_server")
    quoted = parse_registry(_recipe(metadata=_localmaxxing('vllm serve m --x \'{"a": ["b c"]}\' --y 1')), "r.json")
    assert quoted.argv[3:5] == ("--x", '{"a": ["b c"]}')


def test_markdown_fences() -> None:
    """A chat message's closing ``` after the command is dropped; a fence inside the command is refused."""
    recipe = parse_registry(_recipe(argv=["vllm", "serve", "a/b", "--max-num-seqs", "8```"]), "r.json")
    assert recipe.argv == ("vllm", "serve", "a/b", "--max-num-seqs", "8")
    with pytest.raises(RecipeError, match="Markdown code fence") as caught:
        parse_registry(_recipe(argv=["vllm", "serve", "```", "a/b"]), "r.json")
    assert caught.value.field == "argv"


def _tabbyapi_draft(asset: str) -> dict[str, Any]:
    """The registry's TabbyAPI drafts: its generator writes entrypoint /opt/venv/bin/python3 (the image's own
    python3) and arguments `main.py --config /app/config.yml`, with a registry asset mounted there."""
    return {
        "kind": "docker",
        "image": "ghcr.io/theroyallab/tabbyapi:cu13@sha256:" + "1" * 64,
        "entrypoint": "/opt/venv/bin/python3",
        "arguments": ["main.py", "--config", "/app/config.yml"],
        "environment": {"NVIDIA_VISIBLE_DEVICES": "all"},
        "mounts": [
            {"read_only": True, "source": "${MODEL_ROOT}/m-exl3", "target": "/workspace/models"},
            {"read_only": True, "source": f"asset/{asset}", "target": "/app/config.yml"},
        ],
    }


TABBY_CONFIG = {
    "network": {"host": "0.0.0.0", "port": 5000, "disable_auth": True, "api_servers": ["OAI"]},
    "model": {
        "model_dir": "/workspace/models",
        "model_name": "M-EXL3-4bpw",
        "max_seq_len": 131072,
        "cache_mode": "Q4",
        "template_vars_default": {"enable_thinking": True},
    },
    "draft_model": {"draft_mode": "mtp"},
    "sampling": {"override_preset": None},
}


def test_tabbyapi_config_asset_is_read_into_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mounted config is the whole TabbyAPI command: the registry asset's document (from the farm's snapshot),
    less its listen address, takes the path's place in --config, is judged key by key, and the container runs it
    without the asset mount; provenance names the asset and its sha256. The model is the registry instance id."""
    asset = assets.Asset("m-tabbyapi-config.yml", "ab" * 32, TABBY_CONFIG)
    monkeypatch.setattr(assets, "_shipped", lambda: {asset.name: asset})
    recipe = parse_registry(
        _recipe(engine={"name": "tabbyapi"}, launch={"kind": "reference"}, draft_launch=_tabbyapi_draft(asset.name)),
        "r.json",
    )
    assert recipe.argv[:3] == ("python", "main.py", "--config")
    carried = json.loads(recipe.argv[3])
    assert carried["network"] == {"disable_auth": True, "api_servers": ["OAI"]}  # host and port are the worker's
    assert {key: value for key, value in carried.items() if key != "network"} == {
        key: value for key, value in TABBY_CONFIG.items() if key != "network"
    }
    assert recipe.model_id == "org-model--fp8"
    assert recipe.provenance.model_source == "model_instance_id"
    assert any("m-tabbyapi-config.yml (sha256 abababababab)" in note for note in recipe.provenance.command_notes)
    assert recipe.container is not None
    assert [m.target for m in recipe.container.mounts] == ["/workspace/models"]
    assert recipe.container.arguments == recipe.argv[1:]
    command = check_recipe_for_submit(recipe)
    option = command.get("--config")
    assert option is not None
    assert option.json_value == carried


def test_tabbyapi_config_asset_the_snapshot_lacks_is_refused() -> None:
    """Without the asset, nothing says what TabbyAPI would run: refused, naming the mount."""
    document = _recipe(engine={"name": "tabbyapi"}, launch={"kind": "reference"}, draft_launch=_tabbyapi_draft("x.yml"))
    with pytest.raises(RecipeError, match=r"registry asset 'asset/x\.yml', which the farm's snapshot") as caught:
        parse_registry(document, "r.json")
    assert caught.value.field == "draft_launch.mounts[1].source"


def test_container_arguments_lose_the_closing_fence_too() -> None:
    """The image's arguments carry no chat fence either, so what the worker hands the container matches argv."""
    recipe = load_recipe(REGISTRY / "discord-lukealonso-mimo-v2-5-nvfp4-nvfp4-rtx-5090-32gb-tp4-356919.json")
    assert recipe.container is not None
    assert "```" not in recipe.container.arguments
    assert recipe.container.arguments[-2:] == recipe.argv[-2:]
