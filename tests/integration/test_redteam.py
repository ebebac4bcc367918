"""The red team's round against the landed recipe checks (issue 23, after sec1's fixes): each bypass found, as the
input a recipe author would submit and what reached (or, fixed, no longer reaches) the recording fake engine
(tests/fixtures/fake_engines/record_argv.py). A bypass that is not fixed yet is marked xfail(strict) with the
reason, so it turns the suite red the day it is fixed and the mark is not dropped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_recipe_safety import (
    RECORDER,
    VLLM,
    assert_refused_everywhere,
    launch,
    make_recipe,
    probe,
    recording_profile,
    runner,
    write_recipe,
)

from farm.cli.app import app
from farm.errors import ArgumentPolicyError
from farm.net import free_port
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.worker.engines import default_engine_factory
from farm.worker.profile import load_profile

# --- listeners beyond loopback that no value on the command names ---


def test_kv_events_published_on_the_default_endpoint_are_refused(tmp_path: Path) -> None:
    """`--kv-events-config` with the zmq publisher and no endpoint: vLLM's KVEventsConfig binds its default
    `tcp://*:5557`, every interface. The judge walked only the keys present, so this passed; it is now judged
    with the default filled in."""
    argv = [*VLLM, "--kv-events-config", '{"enable_kv_cache_events":true,"publisher":"zmq"}']
    assert_refused_everywhere(tmp_path, "vllm", argv, "not loopback")


@pytest.mark.timeout(60)
def test_kv_events_on_a_loopback_endpoint_still_reach_the_engine(tmp_path: Path) -> None:
    """The benign control: the same publisher on a loopback endpoint reaches the fake as judged."""
    config = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:5557"}'
    received = launch(tmp_path, "vllm", [*VLLM, "--kv-events-config", config], port=free_port())
    assert json.loads(received[received.index("--kv-events-config") + 1])["endpoint"] == "tcp://127.0.0.1:5557"


@pytest.mark.parametrize("option", ["--distributed-executor-backend", "--data-parallel-backend", "-dpb"])
def test_ray_backends_are_refused(tmp_path: Path, option: str) -> None:
    """vLLM's `ray` backends start Ray's own services (GCS, raylet, object manager), which listen beyond the
    worker's loopback port; SGLang's `--use-ray` was already refused for this, vLLM's two spellings passed."""
    assert_refused_everywhere(tmp_path, "vllm", [*VLLM, option, "ray"], "not one of")


@pytest.mark.parametrize(
    "config",
    [
        '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}',
        '{"kv_connector":"MoRIIOConnector","kv_role":"kv_both"}',
        '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":'
        '[{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}]}}',
    ],
)
def test_kv_connectors_that_listen_on_the_network_are_refused(tmp_path: Path, config: str) -> None:
    """vLLM's Mooncake connector starts its bootstrap server on a hard-coded 0.0.0.0 (and MoRIIO and the Mooncake
    store bind the host's network address): no key of the config says so, so the address rules never saw it."""
    assert_refused_everywhere(tmp_path, "vllm", [*VLLM, "--kv-transfer-config", config], "beyond loopback")


@pytest.mark.timeout(60)
def test_a_local_kv_connector_still_reaches_the_engine(tmp_path: Path) -> None:
    """The benign control: CPU offloading, which listens nowhere, reaches the fake."""
    config = '{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}'
    received = launch(tmp_path, "vllm", [*VLLM, "--kv-transfer-config", config], port=free_port())
    assert json.loads(received[received.index("--kv-transfer-config") + 1])["kv_connector"] == "OffloadingConnector"


# --- torch inductor's config, handed through vLLM's --compilation-config as it is ---

INDUCTOR = [
    # the compiler executable inductor runs: any program on PATH, by name
    ('{"inductor_compile_config":{"cpp.cxx":"python3"}}', "names code"),
    ('{"inductor_compile_config":{"cuda.cuda_cxx":"nvcc2"}}', "names code"),
    # a shared library AOTInductor loads
    ('{"inductor_compile_config":{"aot_inductor.aoti_shim_library_path":"/models/org/m/x.so"}}', "names code"),
    # debug traces written under the model root
    ('{"inductor_compile_config":{"trace.enabled":true,"trace.debug_dir":"/models/org/m"}}', "writes"),
    # compiled code shared across jobs through a Redis (loopback by default: the farm's own broker's port)
    ('{"inductor_compile_config":{"fx_graph_remote_cache":true}}', "remote cache"),
    ('{"inductor_compile_config":{"autotune_remote_cache":true}}', "remote cache"),
]


@pytest.mark.parametrize(("config", "why"), INDUCTOR)
def test_inductor_keys_that_run_load_write_or_share_are_refused(tmp_path: Path, config: str, why: str) -> None:
    """vLLM hands `compilation_config.inductor_compile_config` to torch inductor key by key. Dotted keys
    (`cpp.cxx`) slipped past the code-key rule, which split keys on `_` only, and `debug_dir` was no write key."""
    more = '[engine.policy]\npath_roots = ["/models"]'
    assert_refused_everywhere(tmp_path, "vllm", [*VLLM, "--compilation-config", config], why, more=more)


@pytest.mark.timeout(60)
def test_inductor_tuning_still_reaches_the_engine(tmp_path: Path) -> None:
    """The benign control: inductor's plain tuning keys reach the fake."""
    config = '{"inductor_compile_config":{"max_autotune":true,"coordinate_descent_tuning":true}}'
    received = launch(tmp_path, "vllm", [*VLLM, "--compilation-config", config], port=free_port())
    assert json.loads(received[received.index("--compilation-config") + 1]) == json.loads(config)


# --- the model the worker names when the command names none ---


def _mlx_profile(tmp_path: Path) -> Path:
    profile = tmp_path / "mlx.toml"
    profile.write_text(
        "\n".join(
            [
                'name = "rec"',
                "[hardware]",
                'hardware_id = "cpu"',
                "count = 1",
                "[engine]",
                'kind = "mlx"',
                "[engine.mlx]",
                f'executable = ["{sys.executable}", "{RECORDER}"]',
                f'extra_env = {{ FARM_FAKE_ARGV_OUT = "{tmp_path / "argv.json"}" }}',
            ]
        )
        + "\n"
    )
    return profile


def _mlx_recipe(model_id: str, argv: list[str]) -> Recipe:
    return Recipe(
        id="redteam",
        model_id=model_id,
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name="mlx"),
        argv=tuple(argv),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


def test_mlx_model_id_outside_the_roots_is_refused(tmp_path: Path) -> None:
    """An MLX recipe whose command names no `--model` is served the recipe's `model_id`, which no judge saw: it
    reached mlx_lm.server as `--model /etc/ssl` (a path outside every root, where `--model /etc/ssl` on the command
    is refused). model_id is now judged like a model on the command."""
    profile = load_profile(_mlx_profile(tmp_path))
    recipe = _mlx_recipe("/etc/ssl", ["mlx_lm.server"])
    with pytest.raises(ArgumentPolicyError, match="model_id /etc/ssl': outside"):
        default_engine_factory(recipe, profile, free_port(), tmp_path / "engine.log", probe())
    assert not (tmp_path / "argv.json").exists()


@pytest.mark.parametrize(
    ("kind", "argv"), [("vllm", ["vllm", "serve"]), ("sglang", ["python3", "-m", "sglang.launch_server"])]
)
@pytest.mark.parametrize(("model_id", "why"), [("/etc/ssl", "outside"), ("--trust-remote-code", "never begins")])
def test_a_model_id_the_worker_loads_is_judged(
    tmp_path: Path, kind: str, argv: list[str], model_id: str, why: str
) -> None:
    """vLLM's and SGLang's adapters load the recipe's model_id when the command names none. It was never judged:
    `model_id: /etc/ssl` reached the recording fake as vLLM's positional and as SGLang's `--model-path` (and SGLang's
    `farm recipe check` passed it). Both are now refused at the worker (and at submit for SGLang; vLLM's submit
    already refuses a command without a model)."""
    profile_path = recording_profile(tmp_path, kind)
    # no host mapping: the model is the recipe's own
    profile_path.write_text(profile_path.read_text().split(f"[engine.{kind}.model_paths]")[0])
    recipe = make_recipe(kind, argv).model_copy(update={"model_id": model_id})
    with pytest.raises(ArgumentPolicyError, match=why):
        default_engine_factory(recipe, load_profile(profile_path), free_port(), tmp_path / "engine.log", probe())
    assert not (tmp_path / "argv.json").exists()
    if kind == "sglang":
        path = write_recipe(tmp_path, kind, argv, model_id=model_id)
        result = runner.invoke(app, ["recipe", "check", str(path)])
        assert result.exit_code == 2, result.stdout
        assert why in " ".join(result.stderr.split())


def test_mlx_model_option_outside_the_roots_is_refused(tmp_path: Path) -> None:
    """The control of the case above: the same path as `--model` on the command is refused by the judge."""
    profile = load_profile(_mlx_profile(tmp_path))
    with pytest.raises(ArgumentPolicyError, match="outside"):
        default_engine_factory(
            _mlx_recipe("org/m", ["mlx_lm.server", "--model", "/etc/ssl"]),
            profile,
            free_port(),
            tmp_path / "engine.log",
            probe(),
        )


@pytest.mark.timeout(60)
def test_mlx_model_id_that_is_a_repository_still_reaches_the_engine(tmp_path: Path) -> None:
    """The benign control: a repository id as model_id reaches the fake as `--model org/m`."""
    profile = load_profile(_mlx_profile(tmp_path))
    engine = default_engine_factory(
        _mlx_recipe("org/m", ["mlx_lm.server"]), profile, free_port(), tmp_path / "engine.log", probe()
    )
    try:
        engine.start()
        engine.wait_ready(30)
    finally:
        engine.stop()
    received = json.loads((tmp_path / "argv.json").read_text())
    assert received[received.index("--model") + 1] == "org/m"
