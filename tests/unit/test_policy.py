"""The engine argument policy: the seed passes; unknown, abbreviated, risky, secret and smuggled tokens do not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from farm.engines.policy import (
    DEFAULT_POLICY,
    EnginePolicy,
    ServeArgs,
    check_argv,
    normalize_flag,
    shipped_serve_args,
    strip_listen_flags,
)
from farm.errors import ArgumentPolicyError
from farm.recipes.parse import load_recipe

SEED_REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "001_5d0dc33ac7ff8823.txt"

MODEL = "org/model"


def serve(*args: str) -> tuple[str, ...]:
    """A `vllm serve org/model ...` argv."""
    return ("vllm", "serve", MODEL, *args)


def test_shipped_list_records_its_vllm_version() -> None:
    """The shipped list came from vLLM 0.32.0's parser and knows the flags the seed needs."""
    args = shipped_serve_args()
    assert args.engine_version == "0.32.0"
    for flag in ("--tensor-parallel-size", "-tp", "--kernel-config", "--attention-backend", "--port"):
        assert args.lookup(flag) is not None, flag
    assert args.lookup("--kernel-config").json_valued  # type: ignore[union-attr]
    assert args.lookup("--enforce-eager").nargs == 0  # type: ignore[union-attr]


def test_the_seed_recipe_passes() -> None:
    """Every flag of the seed's observed command is accepted by vLLM 0.32.0 (dotted --kernel-config included)."""
    recipe = load_recipe(SEED_REGISTRY)
    assert "--kernel-config.moe_backend" in recipe.argv
    check_argv(recipe.argv)


def test_the_seed_container_arguments_pass() -> None:
    """The seed's draft_launch arguments (--model, --host 0.0.0.0, --port) pass: the worker replaces the last two."""
    recipe = load_recipe(SEED_REGISTRY)
    assert recipe.container is not None
    check_argv(("vllm", "serve", *recipe.container.arguments))


@pytest.mark.parametrize(
    "args",
    [
        ("--max-model-len", "1024", "--enforce-eager"),
        ("--max_model_len", "1024"),  # vLLM reads underscores as dashes
        ("--max-model-len=1024",),
        ("-tp", "2"),
        ("-O3",),
        ("--compilation-config", '{"cudagraph_mode":"FULL_AND_PIECEWISE","custom_ops":["all","-rms_norm"]}'),
        ("--speculative-config", '{"method":"dspark","num_speculative_tokens":5}'),
        ("--compilation-config.cudagraph_mode", "FULL"),
        ("--kernel-config.moe_backend=flashinfer_cutlass",),
        ("--served-model-name", "a", "b"),
        ("--hf-token",),
        ("--seed", "-1"),
        ("--host", "0.0.0.0", "--port", "8000"),
        ("--no-trust-remote-code",),
        ("--model", MODEL, "--dtype", "float32"),
    ],
)
def test_accepted(args: tuple[str, ...]) -> None:
    """Ordinary flags, aliases, inline values, JSON values and dotted sub-keys pass."""
    check_argv(serve(*args))


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--no-such-flag", "1"), "not an option of vllm serve 0.32.0"),
        (("--trust-remote",), "abbreviations are refused"),
        (("--trust-remote-code",), "--trust-remote-code only for"),
        (("--trust_remote_code",), "--trust-remote-code only for"),
        (("--hf-overrides", '{"trust_remote_code": true}'), "sets trust_remote_code"),
        (("--hf-overrides.trust_remote_code", "true"), "sets trust_remote_code"),
        (("--allowed-local-media-path", "/data"), "local media"),
        (("--uds", "/tmp/s"), "Unix socket"),
        (("--grpc-port", "9000"), "no other listener"),
        (("--ssl-keyfile", "/k"), "plain HTTP"),
        (("--api-key", "abc"), "secrets never go in argv"),
        (("--config", "x.yaml"), "past every check"),
        (("--hf-token", "hf_abcdefghijklmnopqrstuvwxyz"), "secret"),
        (("--hf-token", "mytoken"), "token value in argv"),
        (("--worker-cls", "evil.Worker"), "imports a Python class"),
        (("--tool-parser-plugin", "/tmp/p.py"), "runs a Python file"),
        (("--served-model-name", "x; rm -rf /"), "';'"),
        (("--served-model-name", "$(id)"), "'$('"),
        (("--served-model-name", "`id`"), "backtick"),
        (("--served-model-name", "a\nb"), "newline"),
        (("--served-model-name", "a\x00b"), "NUL"),
        (("--served-model-name", "a && b"), "'&&'"),
        (("--served-model-name", "| cat"), "leading '|'"),
        (("--model", "x --trust-remote-code"), "carries a flag"),
        (("--max-model-len=--trust-remote-code",), "carries a flag"),
        (("--speculative-config", '{"model": "x --trust-remote-code"}'), "carries a flag"),
        (("--max-model-len", "--enforce-eager"), "needs a value"),
        (("--max-model-len",), "needs a value"),
        (("--enforce-eager=1",), "takes no value"),
        (("stray",), "a stray value"),
        (("--max-model-len.x", "1"), "not a JSON-valued option"),
        (("--kernel-config.bad key", "1"), "not a valid dotted sub-key"),
        (("--all2all-backend", "nope"), "not one of vLLM's choices"),
    ],
)
def test_refused(args: tuple[str, ...], why: str) -> None:
    """Each refusal is an ArgumentPolicyError whose message says why."""
    with pytest.raises(ArgumentPolicyError, match=re.escape(why)):
        check_argv(serve(*args))


def test_error_names_the_token() -> None:
    """The message quotes the offending token so the sweep author can find it."""
    with pytest.raises(ArgumentPolicyError) as caught:
        check_argv(serve("--enforce-eager", "--no-such-flag"))
    assert "'--no-such-flag'" in str(caught.value)
    assert caught.value.field == "argv"


def test_trust_remote_code_for_an_allowed_model() -> None:
    """The profile's model list opens --trust-remote-code for those models only, positional or --model."""
    policy = EnginePolicy(allow_trust_remote_code_models=frozenset({MODEL}))
    check_argv(serve("--trust-remote-code"), policy)
    check_argv(("vllm", "serve", "--model", MODEL, "--trust-remote-code"), policy)
    with pytest.raises(ArgumentPolicyError, match="not 'other/model'"):
        check_argv(("vllm", "serve", "other/model", "--trust-remote-code"), policy)


def test_local_media_and_code_loading_when_allowed() -> None:
    """allow_local_media and allowed_risky_flags open exactly what they name."""
    policy = EnginePolicy(allow_local_media=True, allowed_risky_flags=frozenset({"--logits-processors"}))
    check_argv(serve("--allowed-local-media-path", "/data", "--logits-processors", "pkg.Proc"), policy)
    with pytest.raises(ArgumentPolicyError, match="worker-cls"):
        check_argv(serve("--worker-cls", "pkg.W"), policy)


def test_newer_flags_through_allowed_extra_flags() -> None:
    """A flag of a newer vLLM passes when the profile lists it; its value is still checked."""
    policy = EnginePolicy(allowed_extra_flags=frozenset({"--future-flag", "--future-switch"}))
    check_argv(serve("--future-flag", "3", "--future-switch", "--enforce-eager"), policy)
    check_argv(serve("--future-flag=3"), policy)
    with pytest.raises(ArgumentPolicyError, match="carries a flag"):
        check_argv(serve("--future-flag", "a --trust-remote-code"), policy)
    with pytest.raises(ArgumentPolicyError, match="not an option"):
        check_argv(serve("--other-future-flag", "1"), policy)


def test_an_extra_flag_that_abbreviates_a_known_one_is_refused() -> None:
    """The old parser would read '--trust-remote' as --trust-remote-code even if the profile allowed it."""
    policy = EnginePolicy(allowed_extra_flags=frozenset({"--trust-remote"}))
    with pytest.raises(ArgumentPolicyError, match="abbreviation of --trust-remote-code"):
        check_argv(serve("--trust-remote"), policy)


def test_a_host_list_from_another_vllm(tmp_path: Path) -> None:
    """A profile may ship the list of the vLLM it runs; the error then names that version."""
    data = {
        "vllm_version": "9.9.9",
        "options": [
            {"option_strings": ["--brand-new"], "nargs": None, "choices": None, "json": False},
            {"option_strings": ["--port"], "nargs": None, "choices": None, "json": False},
        ],
    }
    path = tmp_path / "args.json"
    path.write_text(json.dumps(data))
    policy = EnginePolicy(serve_args=ServeArgs.load(path))
    check_argv(serve("--brand-new", "1"), policy)
    with pytest.raises(ArgumentPolicyError, match=re.escape("vllm serve 9.9.9")):
        check_argv(serve("--enforce-eager"), policy)


def test_a_broken_list_is_an_error(tmp_path: Path) -> None:
    """A list that is not the generator's output is refused with the file named."""
    path = tmp_path / "bad.json"
    path.write_text('{"options": []}')
    with pytest.raises(ArgumentPolicyError, match=re.escape("bad.json")):
        ServeArgs.load(path)


@pytest.mark.parametrize(
    ("flag", "normalized"),
    [
        ("--max_model_len", "--max-model-len"),
        ("--kernel_config.moe_backend", "--kernel-config.moe_backend"),
        ("-tp", "-tp"),
        ("--port", "--port"),
    ],
)
def test_normalize_flag(flag: str, normalized: str) -> None:
    """Underscores become dashes in the flag name, never in dotted sub-keys."""
    assert normalize_flag(flag) == normalized


def test_strip_listen_flags() -> None:
    """--host and --port go, in every spelling, with their values; everything else stays in order."""
    args = ("--host", "0.0.0.0", "-tp", "2", "--port=8000", "--max_model_len", "8", "--port", "1")
    assert strip_listen_flags(args) == ("-tp", "2", "--max_model_len", "8")


def test_empty_argv_is_refused() -> None:
    """An empty argv is an error, not a pass."""
    with pytest.raises(ArgumentPolicyError, match="empty"):
        check_argv((), DEFAULT_POLICY)
