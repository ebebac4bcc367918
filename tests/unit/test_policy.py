"""The engine argument policy: every spelling parsed to one canonical command, and its values judged.

The seed passes; unknown, abbreviated, repeated, code-loading, listening, telemetry, path-escaping, untrusted and
device-mismatched commands do not, each with a message naming the token and the reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from farm.engines.policy import DEFAULT_POLICY, EnginePolicy, canonical_command, check_argv
from farm.engines.vllm.spec import load_vllm_spec, shipped_vllm_spec
from farm.errors import ArgumentPolicyError
from farm.recipes.parse import load_recipe

SEED_REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "001_5d0dc33ac7ff8823.txt"

MODEL = "org/model"
GOOD = "0123456789abcdef0123456789abcdef01234567"
"""The one commit of good/model this host trusts."""
TRC = "--trust-remote-code"
TRUSTING = EnginePolicy(allow_trust_remote_code_models=frozenset({f"good/model@{GOOD}"}))


def serve(*args: str) -> tuple[str, ...]:
    """A `vllm serve org/model ...` argv."""
    return ("vllm", "serve", MODEL, *args)


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_shipped_list_records_its_vllm_version_and_types(version: str) -> None:
    """Each shipped list came from its vLLM release's parser, with each option's type: the seed's flags are in
    it; the default is the newest."""
    spec = shipped_vllm_spec(version)
    assert spec.version == version
    for flag in ("--tensor-parallel-size", "-tp", "--kernel-config", "--attention-backend", "--port", "-dpa"):
        assert spec.lookup(flag) is not None, flag
    assert spec.option("-tp").name == "--tensor-parallel-size"
    assert spec.option("--kernel-config").dotted
    assert spec.option("--max-num-seqs").kind == "int"
    assert spec.option("--enforce-eager").kind in ("flag", "bool")
    assert shipped_vllm_spec().version == "0.33.0"


@pytest.mark.parametrize(
    ("option", "on_0_32", "on_0_33"),
    [
        ("--enable-prefix-caching", "--enable-prefix-caching", "--enable-prefix-caching"),
        ("--no-enable-prefix-caching", "--no-enable-prefix-caching", "--disable-prefix-caching"),
        ("--disable-cascade-attn", "--disable-cascade-attn", "--disable-cascade-attn"),
        ("--no-disable-cascade-attn", "--no-disable-cascade-attn", "--enable-cascade-attn"),
    ],
)
def test_vllm_switches_render_as_each_release_spells_them(option: str, on_0_32: str, on_0_33: str) -> None:
    """vLLM 0.33 pairs `--enable-x` with `--disable-x` (EnableDisableAction; `--no-enable-x` is still read but
    hidden): a switch is judged on/off the same on both releases and rendered in each one's own spelling."""
    for version, rendered in (("0.32.0", on_0_32), ("0.33.0", on_0_33)):
        policy = EnginePolicy(specs={"vllm": shipped_vllm_spec(version)})
        assert canonical_command(serve(option), "vllm", policy).render_options() == (rendered,)
    current = canonical_command(serve("--disable-prefix-caching"), "vllm")
    assert current.get("--enable-prefix-caching") is not None
    assert not current.enabled("--enable-prefix-caching")


def test_the_seed_recipe_passes_and_renders_the_same_values() -> None:
    """Every option of the seed's observed command is accepted, and the canonical command keeps every value
    (the dotted --kernel-config sub-key becomes its JSON object)."""
    recipe = load_recipe(SEED_REGISTRY)
    command = canonical_command(recipe.argv, "vllm", device_count=recipe.hardware_count)
    assert command.model == recipe.model_id
    rendered = command.render_options()
    assert rendered[rendered.index("--tensor-parallel-size") + 1] == "2"
    kernel = json.loads(rendered[rendered.index("--kernel-config") + 1])
    assert "moe_backend" in kernel


@pytest.mark.parametrize(
    ("args", "canonical"),
    [
        (("--max_model_len", "1024"), ("--max-model-len", "1024")),
        (("--max-model-len=1024",), ("--max-model-len", "1024")),
        (("-tp", "1"), ("--tensor-parallel-size", "1")),
        (("--tensor_parallel_size=1",), ("--tensor-parallel-size", "1")),
        (("-O3",), ("--optimization-level", "3")),
        (
            ("--kernel-config.moe_backend=flashinfer_cutlass",),
            ("--kernel-config", '{"moe_backend":"flashinfer_cutlass"}'),
        ),
        (
            ("--compilation-config", '{"custom_ops": ["all", "-rms_norm"]}'),
            ("--compilation-config", '{"custom_ops":["all","-rms_norm"]}'),
        ),
        (("--served-model-name", "a", "b"), ("--served-model-name", "a", "b")),
        (("--no-enable-prefix-caching",), ("--disable-prefix-caching",)),  # 0.33 spells the negation so
        (("--model", MODEL, "--dtype", "float32"), ("--dtype", "float32")),
        (("--data-parallel-address", "127.0.0.1"), ("--data-parallel-address", "127.0.0.1")),
        (("--generation-config", "~/.cache/huggingface/g"), ("--generation-config", "~/.cache/huggingface/g")),
    ],
)
def test_every_spelling_renders_one_canonical_form(args: tuple[str, ...], canonical: tuple[str, ...]) -> None:
    """Dashes or underscores, `=value`, short aliases, -O3, dotted JSON keys: one canonical rendering."""
    command = canonical_command(serve(*args), "vllm", device_count=1)
    assert command.render_options() == canonical
    assert command.model == MODEL


@pytest.mark.parametrize(
    ("argv", "policy", "devices", "why"),
    [
        # the positional model and --model
        ("vllm serve evil/model --model good/model --trust-remote-code", TRUSTING, None, "disagree"),
        # every repository the engine loads, when remote code is trusted
        (f"vllm serve good/model --revision {GOOD} --tokenizer evil/tok {TRC}", TRUSTING, None, "trust list"),
        (f"vllm serve good/model --revision {GOOD} --hf-config-path evil/cfg {TRC}", TRUSTING, None, "trust list"),
        (f"vllm serve good/model --revision {GOOD} --spec-model evil/draft {TRC}", TRUSTING, None, "pins"),
        ("vllm serve other/model --trust-remote-code", TRUSTING, None, "trust list"),
        # code loaders
        ("vllm serve m/x --distributed-executor-backend pkg.Class", DEFAULT_POLICY, None, "not one of"),
        ("vllm serve m/x --log-config-file /models/log.json", DEFAULT_POLICY, None, "factory"),
        ("vllm serve m/x --worker-cls evil.Worker", DEFAULT_POLICY, None, "imports a Python class"),
        ("vllm serve m/x --attention-backend evil.mod.Backend", DEFAULT_POLICY, None, "qualified Python name"),
        # listeners beyond loopback, telemetry
        ("vllm serve m/x -dpa 0.0.0.0", DEFAULT_POLICY, None, "not loopback"),
        ("vllm serve m/x --master-addr 0.0.0.0", DEFAULT_POLICY, None, "not loopback"),
        ("vllm serve m/x --otlp-traces-endpoint http://collector:4317", DEFAULT_POLICY, None, "telemetry"),
        ("vllm serve m/x --uds /tmp/s", DEFAULT_POLICY, None, "Unix socket"),
        # paths outside the roots
        ("vllm serve m/x --chat-template /etc/passwd", DEFAULT_POLICY, None, "outside this host's model and cache"),
        ("vllm serve m/x --generation-config /", DEFAULT_POLICY, None, "outside this host's model and cache"),
        # options that write files: refused wherever they point
        ("vllm serve m/x --download-dir /", DEFAULT_POLICY, None, "writes"),
        ("vllm serve m/x --lora-modules a=/root/.ssh", DEFAULT_POLICY, None, "outside this host's model and cache"),
        ("vllm serve m/x --mm-encoder-fp8-scale-save-path /tmp/s", DEFAULT_POLICY, None, "writes"),
        ("vllm serve ../../etc", DEFAULT_POLICY, None, "relative path"),
        ("vllm serve /models/../etc", DEFAULT_POLICY, None, "'..'"),
        # spellings that dodge checks
        ("vllm serve m/x --tensor_parallel_size 4", DEFAULT_POLICY, 2, "the job has 2"),
        ("vllm serve m/x -tp 2 --tensor-parallel-size 1", DEFAULT_POLICY, 2, "given twice"),
        ("vllm serve m/x --max-model-len 8 --max_model_len 9", DEFAULT_POLICY, None, "given twice"),
        ("vllm serve m/x --trust-remote", DEFAULT_POLICY, None, "abbreviations are refused"),
        ("vllm serve m/x", DEFAULT_POLICY, 2, "the job has 2"),
        # types and the rest
        ("vllm serve m/x --max-num-seqs lots", DEFAULT_POLICY, None, "expected an integer"),
        ("vllm serve m/x --all2all-backend nope", DEFAULT_POLICY, None, "not one of"),
        ("vllm serve m/x --no-such-flag 1", DEFAULT_POLICY, None, "not an option of vllm 0.33.0"),
        ("vllm serve m/x --api-key abc", DEFAULT_POLICY, None, "secrets never go in argv"),
        ("vllm serve m/x --config x.yaml", DEFAULT_POLICY, None, "past every check"),
        ("vllm serve m/x stray", DEFAULT_POLICY, None, "a stray value"),
        ("vllm serve m/x --enforce-eager=1", DEFAULT_POLICY, None, "takes no value"),
        ("vllm serve m/x --max-model-len", DEFAULT_POLICY, None, "needs a value"),
        ("vllm bench m/x", DEFAULT_POLICY, None, "starts with vllm serve"),
    ],
)
def test_refused(argv: str, policy: EnginePolicy, devices: int | None, why: str) -> None:
    """Each case of the audit is an ArgumentPolicyError on the argv field whose message says why."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)) as caught:
        canonical_command(argv.split(), "vllm", policy, device_count=devices)
    assert caught.value.field == "argv"


@pytest.mark.parametrize(
    ("option", "value", "why"),
    [
        ("--kv-transfer-config", {"kv_connector": "X", "kv_connector_module_path": "evil.mod"}, "names code"),
        ("--compilation-config", {"inductor_passes": {"p": "evil.p"}}, "names code"),
        ("--hf-overrides", {"auto_map": {"AutoModelForCausalLM": "evil/repo--modeling.M"}}, "names code"),
        ("--kv-events-config", {"enable_kv_cache_events": True, "endpoint": "tcp://*:5557"}, "not loopback"),
        ("--speculative-config", {"method": "eagle", "model": "evil/draft"}, "trust list"),
        ("--hf-overrides", {"architectures": ["evil.models.Model"]}, "qualified Python name"),
        ("--model-loader-extra-config", {"cache_dir": "/etc"}, "writes"),
        ("--model-loader-extra-config", {"weights_path": "/etc"}, "outside this host's"),
        ("--speculative-config", {"model": "x", "extra": "--trust-remote-code"}, "carries an option"),
    ],
)
def test_json_values_are_judged_key_by_key(option: str, value: object, why: str) -> None:
    """Code keys, qualified names, listening endpoints, paths and draft repositories inside JSON are refused."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)):
        canonical_command(
            ("vllm", "serve", "good/model", "--revision", GOOD, "--trust-remote-code", option, json.dumps(value)),
            "vllm",
            TRUSTING,
        )


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("x; rm -rf /", "';'"),
        ("$(id)", "'$('"),
        ("`id`", "backtick"),
        ("a\nb", "newline"),
        ("a\x00b", "NUL"),
        ("a && b", "'&&'"),
        ("| cat", "leading '|'"),
        ("hf_abcdefghijklmnopqrstuvwxyz", "secret"),
    ],
)
def test_shell_and_secrets_are_refused_in_any_token(token: str, why: str) -> None:
    """No shell runs the command, but shell-shaped or secret-shaped tokens are refused wherever they stand."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)):
        check_argv(serve("--served-model-name", token), engine="vllm")


def test_trust_remote_code_for_trusted_repositories() -> None:
    """The profile's list opens --trust-remote-code when every repository loaded is on it."""
    draft = "f" * 40
    policy = EnginePolicy(allow_trust_remote_code_models=frozenset({f"{MODEL}@{GOOD}", f"org/draft@{draft}"}))
    speculative = json.dumps({"model": "org/draft", "revision": draft, "method": "eagle"})
    check_argv(
        serve("--revision", GOOD, "--trust-remote-code", "--speculative-config", speculative), policy, engine="vllm"
    )
    check_argv(("vllm", "serve", "--model", MODEL, "--revision", GOOD, "--trust-remote-code"), policy, engine="vllm")


def test_code_loading_and_local_media_when_the_host_allows_them() -> None:
    """allowed_risky_flags and allow_local_media open exactly what they name."""
    policy = EnginePolicy(allow_local_media=True, allowed_risky_flags=frozenset({"--logits-processors"}))
    check_argv(
        serve("--allowed-local-media-path", "/models/media", "--logits-processors", "pkg.Proc"), policy, engine="vllm"
    )
    with pytest.raises(ArgumentPolicyError, match="worker-cls"):
        check_argv(serve("--worker-cls", "pkg.W"), policy, engine="vllm")
    with pytest.raises(ArgumentPolicyError, match="local media"):
        check_argv(serve("--allowed-local-media-path", "/models/media"), engine="vllm")


def test_host_roots_decide_paths() -> None:
    """A path under the host's own roots passes; the same path on a host without that root does not."""
    policy = EnginePolicy(path_roots=("/srv/models",))
    check_argv(serve("--generation-config", "/srv/models/hub"), policy, engine="vllm")
    with pytest.raises(ArgumentPolicyError, match="outside"):
        check_argv(serve("--generation-config", "/srv/other"), policy, engine="vllm")


def test_newer_options_through_the_profile() -> None:
    """An option of a newer vLLM passes when the profile lists it, its value still judged as a plain word."""
    policy = EnginePolicy(allowed_extra_flags=frozenset({"--future-flag"}))
    check_argv(serve("--future-flag", "3", "--enforce-eager"), policy, engine="vllm")
    with pytest.raises(ArgumentPolicyError, match="qualified Python name"):
        check_argv(serve("--future-flag", "evil.mod.X"), policy, engine="vllm")
    with pytest.raises(ArgumentPolicyError, match="not an option"):
        check_argv(serve("--other-future-flag", "1"), policy, engine="vllm")
    with pytest.raises(ArgumentPolicyError, match="abbreviation of --trust-remote-code"):
        check_argv(
            serve("--trust-remote"), EnginePolicy(allowed_extra_flags=frozenset({"--trust-remote"})), engine="vllm"
        )


def test_a_host_list_from_another_vllm(tmp_path: Path) -> None:
    """A profile may ship the list of the vLLM it runs; the error then names that version."""
    data = {
        "vllm_version": "9.9.9",
        "options": [
            {"option_strings": ["--brand-new"], "nargs": None, "choices": None, "json": False, "type": "int"},
            {"option_strings": ["--port"], "nargs": None, "choices": None, "json": False, "type": "int"},
        ],
    }
    path = tmp_path / "args.json"
    path.write_text(json.dumps(data))
    policy = EnginePolicy(specs={"vllm": load_vllm_spec(path)})
    check_argv(serve("--brand-new", "1"), policy, engine="vllm")
    with pytest.raises(ArgumentPolicyError, match=re.escape("vllm 9.9.9")):
        check_argv(serve("--enforce-eager"), policy, engine="vllm")


def test_a_broken_list_is_an_error(tmp_path: Path) -> None:
    """A list that is not the generator's output is refused with the file named."""
    path = tmp_path / "bad.json"
    path.write_text('{"options": [{"nargs": 1}]}')
    with pytest.raises(ArgumentPolicyError, match=re.escape("bad.json")):
        load_vllm_spec(path)


def test_empty_argv_is_refused() -> None:
    """An empty argv is an error, not a pass."""
    with pytest.raises(ArgumentPolicyError, match="empty"):
        check_argv((), DEFAULT_POLICY, engine="vllm")
