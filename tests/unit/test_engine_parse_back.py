"""The argv the farm renders, read by each engine's real option declarations, gives exactly the judged values.

The oracle here is independent of farm.engines.reparse: for vLLM and SGLang a stdlib argparse parser built from
the dumped actions with their own classes (store, store_true, append, BooleanOptionalAction...) and `nargs`; for
llama-server the loop of llama.cpp's `common_params_parse_ex` over common/arg.cpp's handlers. Generated commands
mix every declared option with values made to be misread: `--trust-remote-code`, `--host=0.0.0.0`, `-x`, `-1`,
`--port`. Whenever the farm accepts one, the engine reads each judged option with its judged value, and nothing
else: no switch, listener or option the judge did not see."""

from __future__ import annotations

import argparse
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.engines.argspec import CanonicalCommand, ParsedOption, ValueKind
from farm.engines.policy import EnginePolicy, canonical_command
from farm.engines.readback import mirror_for, recipe_tokens
from farm.engines.registry import engine_kind
from farm.engines.reparse import check_parses_back
from farm.errors import ArgumentPolicyError

ROOT = Path(__file__).resolve().parents[2]

TRICKY = [
    "--trust-remote-code",
    "--host=0.0.0.0",
    "--host",
    "0.0.0.0",
    "-x",
    "-1",
    "-0.5",
    "--port",
    "-O3",
    "--model",
    "--config",
    "--enable-lora",
    "a=b",
    "org/model",
    "auto",
    "8",
    "--no-enable-prefix-caching",
    "--speculative-config.model=evil/x",
]
"""Values chosen to be misread as options by a careless rendering."""

PREFIX = {
    "vllm": ["vllm", "serve", "org/model"],
    "sglang": ["python", "-m", "sglang.launch_server", "--model-path", "org/model"],
    "llama.cpp": ["llama-server", "-m", "/models/m.gguf"],
}
POLICY = EnginePolicy(allow_local_media=True)


def _dump(package: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    return data


VLLM = _dump("farm.engines.vllm", "vllm_serve_args_0.33.0.json")
SGLANG = _dump("farm.engines.sglang", "sglang_server_args.json")
LLAMA = _dump("farm.engines.llamacpp", "llama_server_decls_0.3.36.json")

_ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_AppendAction": "append",
    "_CountAction": "count",
    "BooleanOptionalAction": argparse.BooleanOptionalAction,
}


class _Stop(Exception):
    pass


class _Oracle(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _Stop(message)


def argparse_oracle(dump: dict[str, Any], *, positional: bool) -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The engine's parser rebuilt with its own action classes; every default suppressed, so what is read shows."""
    parser = _Oracle(add_help=False, argument_default=argparse.SUPPRESS)
    dest_of: dict[str, str] = {}
    for raw in dump["options"]:
        action = _ACTIONS.get(raw["action"], "store_true" if raw["nargs"] == 0 else "store")
        strings = [s for s in raw["option_strings"] if not (raw["action"] == "BooleanOptionalAction" and "--no-" in s)]
        kwargs: dict[str, Any] = {"dest": raw["dest"], "action": action}
        if action in ("store", "append"):
            kwargs["nargs"] = raw["nargs"]
            if raw["nargs"] == "?":
                kwargs["const"] = "<const>"
        parser.add_argument(*strings, **kwargs)
        for spelling in raw["option_strings"]:
            dest_of[spelling] = raw["dest"]
    if positional:
        parser.add_argument("model_tag", nargs="?")
    return parser, dest_of


def expected_value(option: ParsedOption, raw: dict[str, Any]) -> Any:
    """What the engine's action stores for the judged option."""
    if raw["action"] == "BooleanOptionalAction":
        return option.enabled
    if raw["action"] == "_StoreTrueAction" or (raw["nargs"] == 0 and raw["action"] not in _ACTIONS):
        return True  # SGLang's DeprecatedStoreTrueAction is a store_true that warns
    if raw["action"] == "_StoreFalseAction":
        return False
    if raw["action"] == "_CountAction":
        return 1
    if option.json_value is not None:
        return option.json_value
    if raw["action"] == "_AppendAction":
        return list(option.values)
    if raw["nargs"] in ("+", "*") or isinstance(raw["nargs"], int):
        return list(option.values)
    if raw["nargs"] == "?":
        return option.values[0] if option.values else "<const>"
    return option.values[0]


def read_as_argparse_engine(engine: str, command: CanonicalCommand) -> None:
    dump = VLLM if engine == "vllm" else SGLANG
    parser, dest_of = argparse_oracle(dump, positional=engine == "vllm")
    raw_of = {s: raw for raw in dump["options"] for s in raw["option_strings"]}
    tokens, _ = recipe_tokens(command)
    if engine == "vllm":
        # FlexibleArgumentParser rewrites some tokens before argparse; the rendered argv must hold none of them
        for token in tokens:
            assert token != "--model", token
            assert not token.startswith(("--model=", "-O", "--help=")), token
            assert not re.match(r"^-[^=]*\.", token), token
            assert "_" not in token.partition("=")[0] or not token.startswith("--"), token
    assert "--config" not in tokens
    namespace = vars(parser.parse_args(list(tokens)))
    judged: dict[str, Any] = {}
    for option in command.options:
        if option.spec.kind == ValueKind.FLAG and not option.enabled:
            continue
        spelling = next(s for s in (option.name, *option.spec.aliases) if s in raw_of)
        judged[dest_of[spelling]] = expected_value(option, raw_of[spelling])
    model_dest = "model_tag" if engine == "vllm" else "model_path"
    judged[model_dest] = command.model
    for dest, value in list(namespace.items()):
        if isinstance(value, str) and value.lstrip().startswith(("{", "[")) and not isinstance(judged.get(dest), str):
            namespace[dest] = json.loads(value)
    assert namespace == judged


def read_as_llama_server(command: CanonicalCommand) -> None:
    """llama.cpp's common_params_parse_ex: each token an option, its values the next tokens as they are."""
    by_spelling = {s: raw for raw in LLAMA["options"] for s in (*raw["spellings"], *raw["negatives"])}
    tokens, _ = recipe_tokens(command)
    read: dict[str, list[str]] = {}
    i = 0
    while i < len(tokens):
        raw = by_spelling[tokens[i].replace("_", "-") if tokens[i].startswith("--") else tokens[i]]
        read.setdefault(raw["spellings"][-1], []).extend(tokens[i + 1 : i + 1 + raw["values"]])
        i += 1 + raw["values"]
    judged: dict[str, list[str]] = {}
    for option in command.options:
        if option.spec.kind == ValueKind.FLAG and not option.enabled:
            continue
        raw = next(by_spelling[s] for s in (option.name, *option.spec.aliases) if s in by_spelling)
        judged[raw["spellings"][-1]] = list(option.values)
    assert read == judged


def _options(engine: str) -> list[tuple[str, int | str | None]]:
    """Every option the engine declares and the farm's spec knows (spelling, nargs)."""
    spec = engine_kind(engine).spec()
    if engine == "llama.cpp":
        declared = [(raw["spellings"][-1], 0 if raw["values"] == 0 else raw["values"]) for raw in LLAMA["options"]]
    else:
        dump = VLLM if engine == "vllm" else SGLANG
        declared = [(raw["option_strings"][-1], raw["nargs"]) for raw in dump["options"]]
    return [(s, n) for s, n in declared if spec.lookup(s) is not None and s not in ("--model", "--model-path")]


@st.composite
def commands(draw: st.DrawFn, engine: str) -> list[str]:
    options = _options(engine)
    tokens: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        spelling, nargs = draw(st.sampled_from(options))
        values = [draw(st.sampled_from(TRICKY)) for _ in range(draw(st.integers(0, 2)))]
        if nargs == 0 or not values:
            tokens.append(spelling)
        elif draw(st.booleans()) and engine != "llama.cpp":
            tokens += [f"{spelling}={values[0]}", *values[1:]]
        else:
            tokens += [spelling, *values]
    return tokens


def _accepted(engine: str, tokens: list[str]) -> CanonicalCommand | None:
    try:
        return canonical_command([*PREFIX[engine], *tokens], engine, POLICY)
    except ArgumentPolicyError:
        return None


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llama.cpp"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whatever_the_farm_accepts_the_engine_reads_as_judged(engine: str, data: st.DataObject) -> None:
    """Over generated commands with values made to be misread, an accepted command's rendering parses, with the
    engine's real declarations, to exactly the judged options and values and no other option."""
    tokens = data.draw(commands(engine))
    command = _accepted(engine, tokens)
    if command is None:
        return
    if engine == "llama.cpp":
        read_as_llama_server(command)
    else:
        read_as_argparse_engine(engine, command)


ACCEPTED_TRICKY = {
    "vllm": [
        ["--served-model-name=--trust-remote-code"],
        ["--served-model-name=--host=0.0.0.0"],
        ["--seed", "-1"],
        ["--reasoning-parser=--enable-lora"],
    ],
    "sglang": [
        ["--tool-call-parser=--trust-remote-code"],
        ["--served-model-name=--host=0.0.0.0"],
        ["--chunked-prefill-size", "-1"],
    ],
    "llama.cpp": [["--alias=--port"], ["--seed", "-1"], ["--chat-template=--host"]],
}


@pytest.mark.parametrize(("engine", "tokens"), [(e, t) for e, ts in ACCEPTED_TRICKY.items() for t in ts])
def test_tricky_values_are_accepted_and_read_as_values(engine: str, tokens: list[str]) -> None:
    """The property above is not vacuous: values that look like options are accepted where the engine keeps them
    as values (argparse's one-token `--opt=value`; llama.cpp's next token), and read back as judged."""
    command = _accepted(engine, tokens)
    assert command is not None
    if engine == "llama.cpp":
        read_as_llama_server(command)
    else:
        read_as_argparse_engine(engine, command)
    rendered = recipe_tokens(command)[0]
    if engine != "llama.cpp":
        assert all(t != "--trust-remote-code" and not t.startswith("--host") for t in rendered)


def test_the_old_two_token_rendering_is_caught_by_the_engines_parser() -> None:
    """The attack of the audit, reproduced on the read-back check: SGLang's `--model-checksum` takes an optional
    value, so `--model-checksum --trust-remote-code` (the old rendering of `--model-checksum=--trust-remote-code`)
    is SGLang's trust switch; read back with SGLang 0.5.23's declarations it is refused."""
    command = canonical_command([*PREFIX["sglang"], "--model-checksum=abc"], "sglang", POLICY)
    mirror = mirror_for(command.spec)
    assert mirror is not None
    swapped = ("--model-path", "org/model", "--model-checksum", "--trust-remote-code")
    with pytest.raises(ArgumentPolicyError, match="never judged"):
        check_parses_back(command, swapped, mirror.parser, model="org/model", model_dest=mirror.model_dest)
    oracle, _ = argparse_oracle(SGLANG, positional=False)
    assert vars(oracle.parse_args(list(swapped)))["trust_remote_code"] is True


@pytest.mark.parametrize(
    ("engine", "tokens", "why"),
    [
        ("sglang", ["--model-checksum=--trust-remote-code"], "never begins with '-'"),
        ("vllm", ["--model=--trust-remote-code"], "never begins with '-'|disagree"),
        ("vllm", ["--served-model-name", "a", "-1"], "a list of values"),
        ("sglang", ["--cuda-graph-bs-decode", "1", "-2"], "a list of values"),
    ],
)
def test_values_the_engine_would_misread_are_refused(engine: str, tokens: list[str], why: str) -> None:
    """Where no rendering keeps a value a value (a repository or file named like an option, a list with a value
    beginning with '-'), the command is refused with the reason."""
    with pytest.raises(ArgumentPolicyError, match=why):
        canonical_command([*PREFIX[engine], *tokens], engine, POLICY)


HOST_LLAMA = ROOT / "tests" / "fixtures" / "engine_args" / "llama_server_args_0.3.36.json"
"""deploy/gen_llama_server_args.py's list from the real llama-server of llama-cpp-python 0.3.36 (its --help)."""


def test_a_host_llama_server_list_is_the_parser_its_argv_is_read_back_with() -> None:
    """The shipped spec (llama.cpp 4227c9b, 0.3.16) reads `-fa on` as a switch and renders a bare `--flash-attn`,
    which 0.3.36's llama-server reads with the next token as its value (seen: `unknown value for --flash-attn:
    '--alias'`). A host whose profile names its own list gets that build's counts: `--flash-attn on` renders and
    reads back as judged, and the shipped spec's bare switch would not pass that host's parser."""
    from farm.engines.llamacpp.adapter import load_llamacpp_spec, shipped_llamacpp_spec

    host = EnginePolicy(specs={"llama.cpp": load_llamacpp_spec(HOST_LLAMA)})
    command = canonical_command(["llama-server", "-m", "/models/m.gguf", "-fa", "on"], "llama.cpp", host)
    assert command.render_options() == ("--model", "/models/m.gguf", "--flash-attn", "on")
    older = EnginePolicy(specs={"llama.cpp": shipped_llamacpp_spec("0.3.16")})  # -fa a switch there
    shipped = canonical_command(["llama-server", "-m", "/models/m.gguf", "-fa", "on"], "llama.cpp", older)
    assert canonical_command(["llama-server", "-m", "/models/m.gguf", "-fa"], "llama.cpp").render_options()[2:] == (
        "--flash-attn",
        "on",
    )  # the shipped default, 0.3.36's spec, renders what that build reads
    mirror = mirror_for(host.spec_for("llama.cpp"))
    assert mirror is not None
    with pytest.raises(ArgumentPolicyError, match="llama-server would stop here"):
        check_parses_back(shipped, (*shipped.render_options(), "--alias", "org/m"), mirror.parser)
