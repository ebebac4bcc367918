"""The engine specs cover the options real recipes use (issue 8) without loosening the judge: SGLang's widened
allowlist, llama.cpp's supplement of newer llama-server options, vLLM's dump. Each class of option parses and
passes with a plain value, and each dangerous option the specs refuse is refused naming the option."""

from __future__ import annotations

import collections
import json
import re
import shlex
from importlib import resources

import pytest

from farm.engines.argspec import ArgSpec
from farm.engines.llamacpp import supplement as llamacpp_supplement
from farm.engines.llamacpp.adapter import SPEC_FILES, shipped_llamacpp_spec, spec_from_dump
from farm.engines.policy import EnginePolicy, canonical_command
from farm.engines.registry import engine_kind
from farm.engines.sglang.spec import SGLANG
from farm.errors import ArgumentPolicyError

SGLANG_START = "python -m sglang.launch_server --model-path org/model "
LLAMA_START = "llama-server -m /models/a.gguf "
OLDER_LLAMACPP = EnginePolicy(specs={"llama.cpp": shipped_llamacpp_spec("0.3.16")})
"""A host running 0.3.16's llama-server, whose dump the supplement extends."""


def _spellings(spec: ArgSpec) -> list[str]:
    return [spelling for option in spec.options for spelling in (option.name, *option.aliases)]


@pytest.mark.parametrize(
    "spec",
    [SGLANG, shipped_llamacpp_spec("0.3.16"), shipped_llamacpp_spec("0.3.36")],
    ids=["sglang", "llama.cpp-0.3.16", "llama.cpp-0.3.36"],
)
def test_every_spelling_names_one_option(spec: ArgSpec) -> None:
    """No spelling is declared twice, so no option shadows another's kind."""
    repeated = [name for name, count in collections.Counter(_spellings(spec)).items() if count > 1]
    assert repeated == []


@pytest.mark.parametrize(
    ("options", "devices", "rendered"),
    [
        (  # scheduling and memory
            "--schedule-policy lpm --max-queued-requests 64 --chunked-prefill-size -1 --sleep-on-idle "
            "--kv-cache-dtype fp8_e4m3 --max-total-tokens 128k",
            1,
            # a value beginning with '-' is rendered in the one-token form argparse keeps as a value
            "--schedule-policy lpm --max-queued-requests 64 --chunked-prefill-size=-1 --sleep-on-idle "
            "--kv-cache-dtype fp8_e4m3 --max-total-tokens 128k",
        ),
        (  # parallelism, with SGLang's own aliases
            "--tensor-parallel-size 2 --ep 2 --enable-dp-attention --dp-size 2 --dcp-replicate-q-proj",
            2,
            "--tp-size 2 --ep-size 2 --enable-dp-attention --dp-size 2 --dcp-replicate-q-proj",
        ),
        (  # speculative decoding
            "--speculative-algorithm EAGLE3 --speculative-draft-model org/draft --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --speculative-draft-kv-cache-dtype fp8_e4m3",
            1,
            "--speculative-algorithm EAGLE3 --speculative-draft-model-path org/draft --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --speculative-draft-kv-cache-dtype fp8_e4m3",
        ),
        (  # kernel backends: plugin-extensible lists are plain names
            "--attention-backend fa3 --moe-runner-backend b12x --fp4-gemm-backend flashinfer_cutlass "
            "--moe-a2a-backend deepep --deepep-mode low_latency",
            1,
            None,
        ),
        (  # CUDA graphs, and a deprecated spelling rendered as written for an older SGLang
            '--cuda-graph-config \'{"decode":{"backend":"full","max_bs":64}}\' --cuda-graph-max-bs 64 '
            "--cuda-graph-bs 1 2 4 --disable-piecewise-cuda-graph",
            1,
            '--cuda-graph-config \'{"decode":{"backend":"full","max_bs":64}}\' --cuda-graph-max-bs 64 '
            "--cuda-graph-bs 1 2 4 --disable-piecewise-cuda-graph",
        ),
        (  # caches: hierarchical, mamba (and its deprecated strategy spelling), hisparse
            "--enable-hierarchical-cache --hicache-ratio 2 --hicache-write-policy write_back "
            "--mamba-scheduler-strategy extra_buffer --enable-hisparse --hisparse-config '{\"top_k\":2048}'",
            1,
            None,
        ),
        (  # serving, logging and LoRA
            "--reasoning-parser deepseek-r1 --tool-call-parser qwen --default-chat-template-kwargs "
            "'{\"enable_thinking\":false}' --log-requests-target stdout stderr --enable-lora --max-lora-rank 64",
            1,
            None,
        ),
    ],
    ids=["scheduling", "parallelism", "speculative", "kernels", "cuda-graphs", "caches", "serving"],
)
def test_sglang_options_parse_and_pass(options: str, devices: int, rendered: str | None) -> None:
    """Each class of SGLang option a benchmark recipe uses parses with SGLang's spellings and passes the judge."""
    command = canonical_command(shlex.split(SGLANG_START + options), "sglang", device_count=devices)
    assert command.render_options() == tuple(shlex.split(rendered or options))


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ("--api-key secret", "secrets never go in argv"),
        ("--admin-api-key secret", "secrets never go in argv"),
        ("--ssl-keyfile-password pw", "secrets never go in argv"),
        ("--ssl-keyfile /models/k.pem", "plain HTTP on loopback"),
        ("--enable-trace", "no telemetry export"),
        ("--otlp-traces-endpoint collector:4317", "no outbound telemetry"),
        ("--kv-events-config {}", "outside consumer"),
        ("--tool-server demo", "tool servers beyond the worker's host"),
        ("--grpc-port 50051", "opens no other listener"),
        ("--smg-grpc-mode", "opens no other listener"),
        ("--gated-launch-port 9000", "opens no other listener"),
        ("--sidecar my.module", "runs a Python module by name"),
        ('--forward-hooks \'[{"hook_factory":"x"}]\'', "import path"),
        ("--fastapi-root-path /api", "standard paths"),
        ("--use-ray", "starts Ray"),
        ("--hicache-storage-backend mooncake", "storage service"),
        ("--lmcache-config-file /models/lmcache.yaml", "past every check"),
        ("--remote-instance-weight-loader-seed-instance-ip 10.0.0.2", "over the network"),
        ("--modelexpress-config {}", "over the network"),
        ("--encoder-urls http://10.0.0.3:8000", "beyond the worker's host"),
        ("--decoupled-spec-bind-endpoint tcp://0.0.0.0:5555", "ZMQ endpoint"),
        ("--delete-ckpt-after-loading", "deletes the model checkpoint"),
        ("--config /models/args.yaml", "past every check"),
        ("--enable-custom-logit-processor", "profile does not allow it"),
        ("--load-format remote", "not one of"),
        ("--disaggregation-mode prefill", "not one of"),
        ("--moe-runner-backend my_pkg.kernels.Runner", "qualified Python name"),
        ('--cuda-graph-config \'{"decode":{"runner_cls":"x"}}\'', "names code"),
        ("--deepep-config /etc/deepep.json", "not valid JSON"),
        ("--init-expert-location /etc/experts.json", "outside this host's"),
        ("--log-requests-target /var/log", "writes"),
        ("--speculative-token-map ../../vocab.pt", "a relative path"),
        ("--ep-siz 2", "abbreviations are refused"),
    ],
)
def test_sglang_refuses_dangerous_options(options: str, why: str) -> None:
    """What loads code, listens, dials out, sends telemetry, reaches files outside the roots or carries a secret
    is refused, naming the option as the recipe wrote it."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)) as caught:
        canonical_command(shlex.split(SGLANG_START + options), "sglang", device_count=1)
    assert shlex.split(options)[0] in str(caught.value)


def test_sglang_draft_model_is_a_repository_on_the_trust_list() -> None:
    """With remote code trusted, the draft model and tokenizer must be on the host's trust list like the model."""
    commit = "a" * 40
    argv = shlex.split(
        SGLANG_START + f"--revision {commit} --trust-remote-code --speculative-draft-model-path evil/draft"
    )
    policy = EnginePolicy(allow_trust_remote_code_models=frozenset({f"org/model@{commit}"}))
    with pytest.raises(ArgumentPolicyError, match="evil/draft"):
        canonical_command(argv, "sglang", policy, device_count=1)


def test_sglang_code_switch_takes_no_value_when_a_host_allows_it() -> None:
    """--enable-custom-logit-processor is a switch: on a host that allows it, the next option stays an option."""
    policy = EnginePolicy(allowed_risky_flags=frozenset({"--enable-custom-logit-processor"}))
    argv = shlex.split(SGLANG_START + "--enable-custom-logit-processor --page-size 64")
    command = canonical_command(argv, "sglang", policy, device_count=1)
    assert command.render_options() == ("--enable-custom-logit-processor", "--page-size", "64")


@pytest.mark.parametrize(
    ("options", "rendered"),
    [
        ("--spec-type draft-mtp,ngram-mod --spec-draft-n-max 4", None),
        ("--spec-type draft-mtp --spec-type ngram-mod", None),
        ("-ngl all -ngld auto", "--gpu-layers all --gpu-layers-draft auto"),
        ("--reasoning off --reasoning-budget 0 --reasoning-format deepseek", None),
        ("-rea auto", "--reasoning auto"),
        (
            "--chat-template-kwargs '{\"enable_thinking\": false}'",
            "--chat-template-kwargs '{\"enable_thinking\":false}'",
        ),
        (
            "-cram 0 -ctxcp 4 -cms 512 --cache-prompt",
            "--cache-ram 0 --swa-checkpoints 4 --checkpoint-min-step 512 --cache-prompt",
        ),
        ("--spec-draft-model /models/d.gguf --spec-draft-ngl 99", "--model-draft /models/d.gguf --gpu-layers-draft 99"),
        (
            "-lm mmap --fit off -ncffn 4 --moe-cache-mib 2048",
            "--load-mode mmap --fit off --n-cpu-ffn 4 --moe-cache-mib 2048",
        ),
        ("--temperature 0.6 --top-n-sigma 1.5", "--temp 0.6 --top-nsigma 1.5"),
        ("-fa on --spec-draft-cpu-mask ff", "--flash-attn --cpu-mask-draft ff"),
    ],
    ids=[
        "speculative",
        "speculative-repeated",
        "layer-words",
        "reasoning",
        "reasoning-alias",
        "template-kwargs",
        "caches",
        "draft",
        "memory",
        "sampling",
        "older-spellings",
    ],
)
def test_newer_llamacpp_options_parse_and_pass(options: str, rendered: str | None) -> None:
    """Options of newer llama-server builds parse and pass on 0.3.16's spec (through the supplement); a newer
    spelling of an option the dump has renders in the dump's spelling, which older and newer servers both read.
    0.3.36's own dump has each of them (`--moe-cache-mib` aside, newer still) and takes the same command."""
    command = canonical_command(shlex.split(LLAMA_START + options), "llama.cpp", OLDER_LLAMACPP)
    assert command.render_options()[2:] == tuple(shlex.split(rendered or options))
    if "--moe-cache-mib" not in options:
        current = canonical_command(shlex.split(LLAMA_START + options), "llama.cpp")
        assert current.spec.version == "0.3.36 (0c1e570)"


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ("--tools all", "run commands on the host"),
        ("--agent", "run commands on the host"),
        ("--mcp-servers-json '{\"mcpServers\":{}}'", "spawns the MCP server commands"),
        ("--ui-mcp-proxy", "MCP servers beyond the worker's host"),
        ("--cors-origins *", "CORS settings"),
        ("--models-preset /models/p.ini", "router mode"),
        ("--spec-synth-len 3", "fakes speculative decoding's results"),
        ("--fim-qwen-7b-default", "preset model from the internet"),
        ("--gpt-oss-20b-default", "preset model from the internet"),
        ("--docker-repo gemma3", "Docker Hub"),
        ("--rpc 10.0.0.2:50052", "RPC servers beyond the worker's host"),
        ("--video-ffmpeg-dir /models", "runs the ffmpeg"),
        ("--reuse-port", "the engine's alone"),
        ("-cl", "prints and exits"),
        ("--reasoning maybe", "not one of"),
        ("--spec-type my_pkg.spec.Drafter", "qualified Python name"),
        ('--chat-template-kwargs \'{"loader_cls":"x"}\'', "names code"),
        ("--log-prompts-dir /tmp/prompts", "writes"),
        ("--media-path /etc", "outside this host's"),
        ("--spec-draft-model /home/me/draft.gguf", "outside this host's"),
        ("-ngl most", "expected an integer or 'auto' or 'all'"),
    ],
)
def test_llamacpp_refuses_dangerous_newer_options(options: str, why: str) -> None:
    """Newer llama-server options that run tools, spawn processes, open the API to browsers, download other
    models, fake results or reach files outside the roots are refused, naming the option."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)) as caught:
        canonical_command(shlex.split(LLAMA_START + options), "llama.cpp")
    assert shlex.split(options)[0] in str(caught.value)


def test_the_supplement_names_its_source_and_only_extends_the_shipped_list() -> None:
    """The shipped spec says where its newer options came from; a host's own dump of its llama-server gets exactly
    that list, and every spelling the supplement aliases is one the dump has."""
    shipped = shipped_llamacpp_spec("0.3.16")
    assert "llamacpp_supplement.py" in shipped.source
    assert "0017d6fb" in shipped.source
    dump = json.loads(resources.files("farm.engines.llamacpp").joinpath(SPEC_FILES["0.3.16"]).read_text())
    own = spec_from_dump(dump, "/etc/farm/llama_server_args.json")
    assert own.lookup("--spec-type") is None
    assert shipped.lookup("--spec-type") is not None
    assert all(own.lookup(spelling) is not None for spelling in llamacpp_supplement.ALIASES)
    current = shipped_llamacpp_spec()  # 0.3.36's dump is its own list: no supplement
    assert "supplement" not in current.source
    assert current.lookup("--spec-type") is not None


@pytest.mark.parametrize(
    "options",
    [
        '--speculative-config \'{"method":"mtp","num_speculative_tokens":2}\'',
        "--attention-backend FLASHINFER --max-num-batched-tokens 8192 --async-scheduling",
        "--enable-expert-parallel --kv-cache-dtype fp8 --mm-encoder-tp-mode data --performance-mode throughput",
        '-cc \'{"cudagraph_mode":"FULL_AND_PIECEWISE"}\'',
        "--reasoning-parser deepseek_r1 --tool-call-parser hermes --enable-auto-tool-choice",
    ],
)
def test_vllm_options_recipes_use_are_in_the_dump(options: str) -> None:
    """The newer vLLM options registry recipes use are in the shipped vLLM 0.33.0 dump, judged by their kind."""
    canonical_command(shlex.split("vllm serve org/model " + options), "vllm")


def test_sglang_0_5_23_is_the_allowlist_narrowed_to_its_own_parser() -> None:
    """A worker that runs SGLang 0.5.23 judges with the allowlist cut to the options and values 0.5.23's own
    parser has (sglang_server_args.json, dumped from its wheel): a newer option passes on main's spec and is
    not an option of 0.5.23; a value 0.5.23 lacks is refused; the default stays main's (recipes use it)."""
    release, said = engine_kind("sglang").spec_at("0.5.23")
    assert release.version == "0.5.23"
    assert said == "sglang 0.5.23"
    newer = shlex.split(SGLANG_START + "--enable-pcie-oneshot-allreduce")
    canonical_command(newer, "sglang")
    on_release = EnginePolicy(specs={"sglang": release})
    with pytest.raises(ArgumentPolicyError, match=re.escape("not an option of sglang 0.5.23")):
        canonical_command(newer, "sglang", on_release)
    assert "marlin" in (SGLANG.option("--quantization").choices or ())
    assert "marlin" not in (release.option("--quantization").choices or ())
    rendered = canonical_command(shlex.split(SGLANG_START + "--tp 2 --mem-fraction-static 0.8"), "sglang", on_release)
    assert rendered.render_options() == ("--tp-size", "2", "--mem-fraction-static", "0.8")
    assert engine_kind("sglang").spec().version == "0.5 (main at 001067ff)"
