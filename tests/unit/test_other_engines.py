"""Engines beyond vLLM: llama.cpp's spec from its --help, SGLang's, Ollama's, LM Studio's, TabbyAPI's and MLX's
allowlists; their canonical argv on a worker; engine names and aliases; the recipe environment allowlist."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping

import pytest

from farm.engines.argspec import CanonicalCommand
from farm.engines.environment import check_recipe_environment, refused_reason
from farm.engines.llamacpp.adapter import llama_bench_to_server, llamacpp_process_argv, shipped_llamacpp_spec
from farm.engines.policy import EnginePolicy, canonical_command
from farm.engines.registry import canonical_engine_name, engine_kind, launchable_engines
from farm.engines.sglang.adapter import sglang_process_argv
from farm.errors import ArgumentPolicyError
from farm.recipes import assets

GGUF = "/models/smollm2.gguf"
OLDER_LLAMACPP = EnginePolicy(specs={"llama.cpp": shipped_llamacpp_spec("0.3.16")})
"""A host whose llama-server is 0.3.16's (llama.cpp 4227c9b), where `-fa` is a switch."""


def test_llamacpp_spec_comes_from_the_servers_help() -> None:
    """The shipped llama-server list knows its short aliases, its choices and which options take no value."""
    spec = shipped_llamacpp_spec()
    assert spec.option("-c").name == "--ctx-size"
    assert spec.option("-ngl").name == "--n-gpu-layers" or "-ngl" in spec.option("-ngl").aliases
    assert spec.option("--split-mode").choices == ("layer", "none", "row", "tensor")  # tensor: the supplement's
    assert spec.option("--metrics").kind == "flag"
    assert spec.option("--model").kind == "repo"  # a file name the host maps, or a path under its roots


CANONICAL = [
    (
        "llama.cpp",
        "llama-server -m /models/a.gguf -c 2048 -fa --jinja",
        ("--model", "/models/a.gguf", "--ctx-size", "2048", "--flash-attn", "on", "--jinja"),
    ),
    (
        "llama.cpp",
        "llama-server -hf unsloth/Qwen3-8B-GGUF:Q4_K_M -np 4",
        ("--hf-repo", "unsloth/Qwen3-8B-GGUF:Q4_K_M", "--parallel", "4"),
    ),
    (
        "sglang",
        "python3 -m sglang.launch_server --model Qwen/Qwen3-8B --tensor-parallel-size 2 --mem-fraction-static 0.8",
        ("--tp-size", "2", "--mem-fraction-static", "0.8"),
    ),
    ("ollama", "ollama run qwen3:8b --verbose", ("--verbose",)),
    (
        "lmstudio",
        "lms load qwen/qwen3-8b --context-length 8192 --gpu max",
        ("--context-length", "8192", "--gpu", "max"),
    ),
    (
        "tabbyapi",
        "python main.py --model-name turboderp/Qwen3-8B-exl2 --max-seq-len 8192",
        ("--model-name", "turboderp/Qwen3-8B-exl2", "--max-seq-len", "8192"),
    ),
    ("mlx", "mlx_lm.server --model mlx-community/Qwen3-4B-4bit --max-tokens 512", ("--max-tokens", "512")),
]


@pytest.mark.parametrize(("engine", "argv", "rendered"), CANONICAL)
def test_each_engine_parses_to_its_canonical_form(engine: str, argv: str, rendered: tuple[str, ...]) -> None:
    """Every engine's recipe command parses with its own spec and renders in canonical spellings."""
    devices = 2 if "tensor-parallel" in argv else 1
    command = canonical_command(argv.split(), engine, device_count=devices)
    assert command.render_options() == rendered


@pytest.mark.parametrize(
    ("engine", "argv", "why"),
    [
        ("llama.cpp", "llama-server -m /etc/passwd", "outside this host's model and cache roots"),
        ("llama.cpp", "llama-server -m /models/a.gguf -c 2048 --ctx-size 4096", "given twice"),
        ("llama.cpp", "llama-server -m /models/a.gguf --api-key k", "secrets never go in argv"),
        ("llama.cpp", "llama-server -m /models/a.gguf --rpc 10.0.0.2:50052", "RPC servers beyond"),
        ("llama.cpp", "llama-server -mu http://evil/model.gguf", "downloads a model from any URL"),
        ("llama.cpp", "llama-server -m /models/a.gguf --ctx", "not an option"),
        ("llama.cpp", "llama-server -m /models/a.gguf --slot-save-path /tmp", "writes"),
        ("sglang", "python -m sglang.launch_server --model-path m/x --speculative-algo EAGLE", "abbreviations are"),
        ("sglang", "python -m sglang.launch_server --model-path m/x --tp 2", "the job has 1"),
        ("sglang", "python -m sglang.launch_server --model-path m/x --tp-size 4", "the job has 1"),
        ("sglang", "python -m sglang.launch_server --model-path m/x --dist-init-addr 0.0.0.0:5000", "not loopback"),
        ("sglang", "python -m sglang.launch_server --model-path m/x --nnodes 2", "not one of"),
        ("sglang", "python -m sglang.launch_server --model-path evil/m --model good/m", "given twice"),
        ("sglang", "python -m sglang.launch_server --model-path m/x --trust-remote-code", "trust list"),
        ("mlx", "mlx_lm.server --model m/x --adapter-path /root/.ssh", "outside this host's"),
        ("lmstudio", "lms server start --cors", "every web origin"),
        ("tabbyapi", "python main.py --config /etc/tabby.yml", "past every check"),
        ("ollama", "ollama pull qwen3:8b", "starts with"),
    ],
)
def test_each_engine_refuses(engine: str, argv: str, why: str) -> None:
    """The same classes of refusal hold for every engine, with its own option names."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)):
        canonical_command(argv.split(), engine, device_count=1)


def test_llamacpp_on_a_worker_loads_the_hosts_file_under_the_recipe_name() -> None:
    """The recipe's -hf names what to load; the host's GGUF file is loaded and served under the model id."""
    command = canonical_command(["llama-server", "-hf", "org/m-GGUF", "-c", "2048", "--port", "8080"], "llama.cpp")
    argv = llamacpp_process_argv(
        command, executable=("/bin/llama-server",), host="127.0.0.1", port=9, served_model="org/m", model_path=GGUF
    )
    assert argv == (
        "/bin/llama-server",
        "--ctx-size",
        "2048",
        "--model",
        GGUF,
        "--alias",
        "org/m",
        "--host",
        "127.0.0.1",
        "--port",
        "9",
    )


def _on_host(command: CanonicalCommand, draft_paths: Mapping[str, str] = {}) -> tuple[str, ...]:
    return llamacpp_process_argv(
        command,
        executable=("/bin/llama-server",),
        host="127.0.0.1",
        port=9,
        served_model="org/m",
        model_path=GGUF,
        draft_paths=draft_paths,
    )


def test_llamacpp_draft_named_by_its_file_is_the_hosts_file() -> None:
    """A draft model named by its file name alone is the host's file for that name (profile draft_paths); a host
    without it has no command for the job. An absolute draft path under the roots is used as it is."""
    argv = ["llama-server", "-hf", "org/m-GGUF", "-md", "d.gguf", "--spec-type", "draft-mtp"]
    command = canonical_command(argv, "llama.cpp")
    launched = _on_host(command, {"d.gguf": "/models/d-Q8.gguf"})
    assert launched[launched.index("--spec-draft-model") + 1] == "/models/d-Q8.gguf"  # 0.3.36's name for -md
    assert "d.gguf" not in launched
    with pytest.raises(ArgumentPolicyError, match=re.escape("no file for the draft model 'd.gguf'")):
        _on_host(command)
    launched = _on_host(canonical_command([*argv[:4], "/models/d.gguf"], "llama.cpp"))
    assert launched[launched.index("--spec-draft-model") + 1] == "/models/d.gguf"


def test_a_bare_gguf_name_passes_submit_but_needs_the_hosts_file() -> None:
    """`-m model.gguf` names what to load: accepted as a name, but a host that maps no file for the model
    refuses to start it (the name would be read relative to the worker's own directory)."""
    command = canonical_command(("llama-server", "-m", "model-Q2.gguf"), "llama.cpp")
    with pytest.raises(ArgumentPolicyError, match="no file by an absolute path"):
        llamacpp_process_argv(command, executable=("x",), host="h", port=1, served_model="org/m", model_path=None)
    argv = llamacpp_process_argv(command, executable=("x",), host="h", port=1, served_model="org/m", model_path=GGUF)
    assert argv[1:3] == ("--model", GGUF)
    with pytest.raises(ArgumentPolicyError, match="relative path"):
        canonical_command(("llama-server", "-m", "./models/model.gguf"), "llama.cpp")


def test_llamacpp_without_a_host_file_or_a_recipe_model_is_refused() -> None:
    """No file on the host and none in the recipe: nothing to load, refused before starting."""
    command = canonical_command(("llama-server", "-c", "2048"), "llama.cpp")
    with pytest.raises(ArgumentPolicyError, match="model_paths"):
        llamacpp_process_argv(command, executable=("x",), host="h", port=1, served_model="org/m", model_path=None)


def test_sglang_on_a_worker() -> None:
    """SGLang gets the model by --model-path, the served name and the worker's address, once each."""
    command = canonical_command(
        [
            "python",
            "-m",
            "sglang.launch_server",
            "--model",
            "Qwen/Qwen3-8B",
            "--port",
            "30000",
            "--served-model-name",
            "x",
        ],
        "sglang",
    )
    argv = sglang_process_argv(
        command,
        executable=("python3", "-m", "sglang.launch_server"),
        host="127.0.0.1",
        port=7,
        served_model="Qwen/Qwen3-8B",
        model_path=None,
    )
    assert argv == (
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-8B",
        "--served-model-name",
        "Qwen/Qwen3-8B",
        "--host",
        "127.0.0.1",
        "--port",
        "7",
    )


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("vLLM", "vllm"),
        ("llama-cpp", "llama.cpp"),
        ("LLAMA.CPP", "llama.cpp"),
        ("LM-Studio", "lmstudio"),
        ("mlx-lm", "mlx"),
    ],
)
def test_engine_names_ignore_case_and_know_aliases(name: str, canonical: str) -> None:
    """The registry's spellings all resolve to one canonical engine name."""
    assert canonical_engine_name(name) == canonical
    assert engine_kind(name).name == canonical


def test_unknown_engine_and_the_launchable_list() -> None:
    """An unknown engine names the ones the farm reads; only engines with a launching adapter are runnable."""
    with pytest.raises(ArgumentPolicyError, match="unknown engine 'hipfire'"):
        engine_kind("hipfire")
    assert launchable_engines() == ("vllm", "llama.cpp", "sglang", "ollama", "lmstudio", "tabbyapi", "mlx")


def test_extra_options_of_a_newer_engine_through_the_profile() -> None:
    """A host may allow an option its engine's list lacks; the value is still judged."""
    policy = EnginePolicy(allowed_extra_flags=frozenset({"--new-thing"}))
    canonical_command(("llama-server", "-m", GGUF, "--new-thing", "3"), "llama.cpp", policy)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("DOCKER_HOST", "listens or connects"),
        ("LD_AUDIT", "loads code"),
        ("LD_PRELOAD", "loads code"),
        ("HTTPS_PROXY", "listens or connects"),
        ("PYTHONPATH", "loads code"),
        ("HF_TOKEN", "a secret"),
        ("VLLM_API_KEY", "a secret"),
        ("VLLM_PLUGINS", "loads code"),
        ("VLLM_LOGGING_CONFIG_PATH", "loads code"),
        ("VLLM_HOST_IP", "listens or connects"),
        ("VLLM_PORT", "listens or connects"),
        ("OLLAMA_HOST", "listens or connects"),
        ("HF_ENDPOINT", "where or how downloads come from"),
        ("VLLM_CACHE_ROOT", "a path"),
        ("LLAMA_ARG_MODEL", "past the argument policy"),
        ("VLLM_ALLOW_INSECURE_SERIALIZATION", "loads code"),
    ],
)
def test_environment_names_outside_the_allowlist(name: str, why: str) -> None:
    """The recipe environment's allowlist refuses, with a reason, anything that is not tuning."""
    reason = refused_reason(name, "vllm")
    assert reason is not None
    assert why in reason


def test_credentials_in_a_recipe_environment_are_dropped() -> None:
    """A recipe may name HF_TOKEN (registry recipes do, with a placeholder): it is dropped, never passed."""
    env = {"HUGGING_FACE_HUB_TOKEN": "<redacted-credential>", "HF_TOKEN": "hf_x", "OMP_NUM_THREADS": "8"}
    assert check_recipe_environment(env, "vllm") == {"OMP_NUM_THREADS": "8"}


def test_tuning_environment_passes() -> None:
    """Tuning variables pass unchanged."""
    env = {
        "VLLM_USE_V1": "1",
        "NCCL_P2P_DISABLE": "1",
        "OMP_NUM_THREADS": "8",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }
    assert check_recipe_environment(env, "vllm") == env


def test_a_llama_bench_page_becomes_the_server_command() -> None:
    """LocalMaxxing's llama-bench command loads the same model the same way on llama-server; the benchmark's
    own options are dropped and reported; the result passes llama-server's spec."""
    bench = shlex.split("llama-bench -m -p 512 -n 128 -ngl 28 -sm layer -fa on -ctk f16 -ctv f16 -r 5")
    argv, dropped, defaults = llama_bench_to_server(bench)
    assert argv == (
        "llama-server",
        "--n-gpu-layers",
        "28",
        "--split-mode",
        "layer",
        "--flash-attn",
        "on",
        "--cache-type-k",
        "f16",
        "--cache-type-v",
        "f16",
    )
    assert dropped == ("-m", "-p", "512", "-n", "128", "-r", "5")
    assert defaults == ()
    for release in ("0.3.16", "0.3.36"):
        canonical_command(argv, "llama.cpp", EnginePolicy(specs={"llama.cpp": shipped_llamacpp_spec(release)}))
    off, _, _ = llama_bench_to_server(shlex.split("llama-bench -m /models/a.gguf -fa 0 -ngl 99"))
    assert off == ("llama-server", "--model", "/models/a.gguf", "--flash-attn", "off", "--n-gpu-layers", "99")


def test_llama_bench_defaults_are_made_explicit() -> None:
    """llama-bench puts every layer on the GPU unless told otherwise; llama-server does not, so the translation
    says -ngl 99 when the bench command left it out."""
    argv, dropped, defaults = llama_bench_to_server(shlex.split("llama-bench -m /models/a.gguf -p 512 -n 128"))
    assert argv == ("llama-server", "--model", "/models/a.gguf", "--n-gpu-layers", "99")
    assert dropped == ("-p", "512", "-n", "128")
    assert defaults == ("--n-gpu-layers", "99")


@pytest.mark.parametrize(
    ("bench", "why"),
    [
        ("llama-bench -m /models/a.gguf -ngl 28,99", "several values"),
        ("llama-bench -m /models/a.gguf --rpc 10.0.0.1:5000", "the farm can translate"),
        ("llama-bench -fa maybe", "0/1 or on/off"),
        ("llama-server -m /models/a.gguf", "not a llama-bench command"),
    ],
)
def test_llama_bench_commands_that_do_not_translate(bench: str, why: str) -> None:
    """What a server cannot run the same way is refused, naming the token."""
    with pytest.raises(ArgumentPolicyError, match=why):
        llama_bench_to_server(bench.split())


@pytest.mark.parametrize(
    ("argv", "rendered"),
    [
        ("llama-server -m /models/a.gguf -fa on", ("--model", "/models/a.gguf", "--flash-attn")),
        ("llama-server -m /models/a.gguf --flash-attn=1", ("--model", "/models/a.gguf", "--flash-attn")),
        ("llama-server -m /models/a.gguf -fa off", ("--model", "/models/a.gguf")),
        ("llama-server -m /models/a.gguf -fa auto -c 8", ("--model", "/models/a.gguf", "--ctx-size", "8")),
        ("llama-server -m /models/a.gguf -fa -c 8", ("--model", "/models/a.gguf", "--flash-attn", "--ctx-size", "8")),
    ],
)
def test_newer_llamacpp_switch_values_on_an_older_spec(argv: str, rendered: tuple[str, ...]) -> None:
    """A newer llama-server's `-fa on|off|auto` runs on a spec where -fa is a switch (0.3.16's): on sets it, off
    and auto leave the server's default."""
    assert canonical_command(argv.split(), "llama.cpp", OLDER_LLAMACPP).render_options() == rendered


@pytest.mark.parametrize(
    ("argv", "rendered"),
    [
        ("-fa", ("--flash-attn", "on")),
        ("-fa -c 8", ("--flash-attn", "on", "--ctx-size", "8")),
        ("--flash-attn", ("--flash-attn", "on")),
        ("-fa 1", ("--flash-attn", "on")),
        ("--flash-attn=enabled", ("--flash-attn", "on")),
        ("-fa 0", ("--flash-attn", "off")),
        ("-fa false", ("--flash-attn", "off")),
        ("-fa auto", ("--flash-attn", "auto")),
        ("-fa -1", ("--flash-attn", "auto")),
        ("-rea 0 --fit 1", ("--reasoning", "off", "--fit", "on")),
        ("--no-mmap", ("--load-mode", "none")),
        ("--mlock", ("--load-mode", "mmap+mlock")),
        ("--mlock --no-mmap", ("--load-mode", "mlock")),
        ("--mmap", ("--load-mode", "mmap")),
        ("-nkvo --no-warmup -nocb", ("--no-kv-offload", "--no-warmup", "--no-cont-batching")),
    ],
)
def test_llamacpp_commands_render_as_the_current_server_takes_them(argv: str, rendered: tuple[str, ...]) -> None:
    """On 0.3.36's llama-server (the default) flash attention takes on|off|auto: a bare `-fa` (older builds) is
    on, llama-bench's 0/1 and the other words llama.cpp reads are its on/off/auto; the removed mmap/mlock switches
    are `--load-mode`; a negation on the same help line as its switch renders as the negation."""
    command = canonical_command(["llama-server", "-m", GGUF, *argv.split()], "llama.cpp")
    assert command.spec.version == "0.3.36 (0c1e570)"
    assert command.render_options()[2:] == rendered


def test_a_switch_value_that_is_not_one_is_refused() -> None:
    """`--flash-attn=maybe` is neither on nor off, on the older spec (a switch) and on the current one."""
    with pytest.raises(ArgumentPolicyError, match="a switch here"):
        canonical_command(["llama-server", "-m", GGUF, "--flash-attn=maybe"], "llama.cpp", OLDER_LLAMACPP)
    with pytest.raises(ArgumentPolicyError, match="not one of auto, off, on"):
        canonical_command(["llama-server", "-m", GGUF, "--flash-attn=maybe"], "llama.cpp")
    with pytest.raises(ArgumentPolicyError, match="given twice"):
        canonical_command(["llama-server", "-m", GGUF, "--no-mmap", "--load-mode", "mmap"], "llama.cpp")


def test_sglang_reads_its_documented_tp_and_dp_spellings_and_launches_the_declared_ones() -> None:
    """`--tp`/`--dp` are what SGLang's documentation writes; the launched argv spells the declared options, and the
    device check reads them like any other spelling."""
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m/x", "--tp", "2", "--dp=2"]
    command = canonical_command(argv, "sglang", device_count=4)
    rendered = command.render_options()
    assert rendered[rendered.index("--tp-size") + 1] == "2"
    assert rendered[rendered.index("--dp-size") + 1] == "2"
    assert "--tp" not in rendered
    assert "--dp=2" not in rendered
    with pytest.raises(ArgumentPolicyError, match="the job has 2"):
        canonical_command(argv, "sglang", device_count=2)


def test_sglang_counts_data_parallel_replicas_unless_they_run_inside_tensor_parallel() -> None:
    """SGLang's `--dp-size` replicas each take tp devices; with --enable-dp-attention they share them."""
    base = ["python", "-m", "sglang.launch_server", "--model-path", "m/x", "--tp-size", "2", "--dp-size", "2"]
    canonical_command(base, "sglang", device_count=4)
    with pytest.raises(ArgumentPolicyError, match="the job has 2"):
        canonical_command(base, "sglang", device_count=2)
    canonical_command([*base, "--enable-dp-attention"], "sglang", device_count=2)
    with pytest.raises(ArgumentPolicyError, match="the job has 4"):
        canonical_command([*base, "--enable-dp-attention"], "sglang", device_count=4)


def _tabby(config: dict[str, object]) -> list[str]:
    return ["python", "main.py", "--config", json.dumps(config)]


def _shipping(monkeypatch: pytest.MonkeyPatch, *configs: dict[str, object]) -> None:
    """The farm's snapshot of registry config assets, holding these documents."""
    shipped = {f"a{i}.yml": assets.Asset(f"a{i}.yml", "0" * 64, config) for i, config in enumerate(configs)}
    monkeypatch.setattr(assets, "_shipped", lambda: shipped)


GOOD_TABBY = {
    "network": {"api_servers": ["OAI", "kobold"], "disable_auth": True},
    "model": {
        "model_dir": "/models/tabby",
        "model_name": "M-EXL3",
        "cache_mode": "8,8",
        "gpu_split": [20, 4.5],
        "max_seq_len": 131072,
        "draft_model": {"draft_mode": "mtp"},
    },
    "draft_model": {"draft_mode": "ngram", "ngram_match_min": 2},
    "developer": {"seqlog": False},
}


def test_tabbyapi_config_document_passes_key_by_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shipped config of known sections and keys, each value of its kind, passes; false for a refused key is the
    same as leaving it out."""
    _shipping(monkeypatch, GOOD_TABBY)
    command = canonical_command(_tabby(GOOD_TABBY), "tabbyapi")
    option = command.get("--config")
    assert option is not None
    assert option.json_value == GOOD_TABBY
    assert command.render_options() == ("--config", json.dumps(GOOD_TABBY, separators=(",", ":")))


def test_tabbyapi_config_must_be_a_shipped_asset_and_stand_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """An inline config the farm does not ship is refused; so is any option beside --config, which TabbyAPI would
    ignore (a --model-name beside it would not be the model it serves)."""
    _shipping(monkeypatch, GOOD_TABBY)
    with pytest.raises(ArgumentPolicyError, match="an inline config"):
        canonical_command(_tabby({**GOOD_TABBY, "sampling": {"override_preset": "x"}}), "tabbyapi")
    with pytest.raises(ArgumentPolicyError, match="reads only its config when --config is given"):
        canonical_command(["python", "main.py", "--model-name", "other", *_tabby(GOOD_TABBY)[2:]], "tabbyapi")


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"model": {"model_dir": "/etc"}}, "outside this host's model and cache roots"),
        ({"model": {"model_dir": "models"}}, "a relative path"),
        ({"model": {"model_name": "../../etc"}}, "without '..'"),
        ({"model": {"prompt_template": "/etc/anything"}}, "without '..'"),
        ({"sampling": {"override_preset": "../../../../etc/x"}}, "without '..'"),
        ({"model": {"draft_model": {"draft_model_name": "x/../../../tmp/d"}}}, "without '..'"),
        ({"model": {"draft_model": {"evil": 1}}}, "not a key the farm knows"),
        ({"lora": {"lora_dir": "/root/.ssh"}}, "outside this host's model and cache roots"),
        ({"lora": {"loras": [{"name": "x/../../home/other/evil"}]}}, "torch.load"),
        ({"network": {"host": "0.0.0.0"}}, "worker's to set"),
        ({"network": {"port": "x"}}, "worker's to set"),
        ({"developer": {"seqlog": True}}, "no outbound telemetry"),
        ({"developer": {"seqlog_server_url": "http://evil:5341"}}, "no outbound telemetry"),
        ({"config": {"config": "/etc/other.yml"}}, "reads another config file"),
        ({"model": {"template_vars_default": {"loader": "os.system"}}}, "qualified Python name"),
        ({"model": {"template_vars_default": {"x": "http://evil.example/"}}}, "not loopback"),
        ({"model": {"tool_format": "pkg.module.Parser"}}, "qualified Python name"),
        ({"model": {"reasoning": "yes"}}, "expected true or false"),
        ({"model": {"max_seq_len": "128k"}}, "expected an integer"),
        ({"model": {"max_seq_len": 1.5}}, "expected an integer"),
        ({"model": {"rope_scale": True}}, "expected a number"),
        ({"network": {"api_servers": "OAI"}}, "expected a list"),
        ({"network": {"api_servers": ["OAI", "grpc"]}}, "not one of"),
        ({"model": {"backend": "exllamav9"}}, "not one of"),
        ({"model": {"evil_hook": 1}}, "not a key the farm knows"),
        ({"plugins": {"x": 1}}, "not a section of the engine's config"),
        ({"model": "everything"}, "expected a mapping"),
        ({"model": {"model_dir": ["/models"]}}, "expected a plain value"),
    ],
)
def test_tabbyapi_config_document_refusals(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, object], why: str
) -> None:
    """Even a shipped asset is judged key by key: the snapshot is registry data, not the farm's word."""
    _shipping(monkeypatch, config)
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)):
        canonical_command(_tabby(config), "tabbyapi")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("/app/config.yml", "past every check"),
        ("config.yml", "past every check"),
        ("[1, 2]", "past every check"),
        ("{not json", "not valid JSON"),
    ],
)
def test_tabbyapi_config_is_a_document_never_a_file(value: str, why: str) -> None:
    """A path (or anything but a JSON object of sections) would let TabbyAPI read options past every check."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)):
        canonical_command(["python", "main.py", "--config", value], "tabbyapi")


@pytest.mark.parametrize(
    ("version", "spec_version", "said"),
    [
        ("0.3.16", "0.3.16 (4227c9b)", "llama.cpp 0.3.16 (4227c9b)"),
        ("0.3.36", "0.3.36 (0c1e570)", "llama.cpp 0.3.36 (0c1e570)"),
        ("0.3.20", "0.3.16 (4227c9b)", "the nearest older spec shipped for 0.3.20"),
        ("0.4.1", "0.3.36 (0c1e570)", "the nearest older spec shipped for 0.4.1"),
        ("0.2.90", "0.3.16 (4227c9b)", "the oldest spec shipped; none for 0.2.90 or older"),
        (None, "0.3.36 (0c1e570)", "llama.cpp 0.3.36 (0c1e570)"),
    ],
)
def test_a_version_is_judged_with_its_own_spec_or_the_nearest_older(
    version: str | None, spec_version: str, said: str
) -> None:
    """The table gives the spec of the llama.cpp release a worker runs, the nearest older one shipped where that
    release has none (saying so), and the newest where no version is known (what submit judges against)."""
    spec, note = engine_kind("llama.cpp").spec_at(version)
    assert spec.version == spec_version
    assert said in note
    assert engine_kind("llama.cpp").spec().version == "0.3.36 (0c1e570)"


def test_a_worker_profile_version_picks_the_spec_that_judges() -> None:
    """A llama.cpp worker whose profile says it runs 0.3.16 judges `-fa 1` as that build's switch, and its policy
    says which spec judged (for provenance); without a version (a stand-in: nothing is asked) the newest judges."""
    from farm.worker.engines import engine_policy
    from farm.worker.profile import WorkerProfile

    def profile(**llamacpp: object) -> WorkerProfile:
        return WorkerProfile.model_validate(
            {
                "name": "p",
                "hardware": {"hardware_id": "cpu", "count": 1, "source": "declared"},
                "engine": {"kind": "llama.cpp", "stand_in": not llamacpp, "llamacpp": llamacpp},
            }
        )

    argv = ["llama-server", "-m", GGUF, "-fa", "1"]
    older = engine_policy(profile(version="0.3.16"))
    assert canonical_command(argv, "llama.cpp", older).render_options()[2:] == ("--flash-attn",)
    assert older.spec_notes["llama.cpp"] == "llama.cpp 0.3.16 (4227c9b)"
    newest = engine_policy(profile())
    assert canonical_command(argv, "llama.cpp", newest).render_options()[2:] == ("--flash-attn", "on")
    assert newest.spec_notes["llama.cpp"] == "llama.cpp 0.3.36 (0c1e570)"
