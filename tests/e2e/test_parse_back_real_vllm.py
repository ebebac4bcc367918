"""The rendered argv read by vLLM 0.32.0's own parser (FlexibleArgumentParser with `vllm serve`'s arguments, in the
vLLM environment deploy/install-vllm-cpu.sh makes): the options it sets are exactly the judged ones, each string
value the judged string, and `--trust-remote-code` or `--host` never set by a value that looked like an option.
This is the check farm.engines.reparse mirrors, run against the real parser rather than its declarations."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from farm.engines.argspec import CanonicalCommand, ValueKind
from farm.engines.policy import EnginePolicy, canonical_command
from farm.engines.readback import recipe_tokens
from farm.engines.vllm.cpu import vllm_cpu_python
from farm.engines.vllm.spec import shipped_vllm_spec
from farm.errors import ArgumentPolicyError

PARSE = r"""
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
defaults = vars(parser.parse_args(["m"]))
out = []
for argv in json.load(sys.stdin):
    try:
        got = vars(parser.parse_args(argv))
    except SystemExit:
        out.append(None)
        continue
    changed = {k: (v if isinstance(v, (str, int, float, bool, type(None))) else repr(v))
               for k, v in got.items() if k in defaults and v != defaults[k] or k not in defaults}
    out.append(changed)
print(json.dumps(out))
"""

TRICKY = ["--trust-remote-code", "--host=0.0.0.0", "--host", "-x", "-1", "--port", "-O3", "--model", "a=b", "8"]
POLICY = EnginePolicy(allow_local_media=True, specs={"vllm": shipped_vllm_spec("0.32.0")})  # the real parser: 0.32.0


def _commands(count: int) -> list[CanonicalCommand]:
    """Accepted commands over vLLM's single-valued string and switch options with values made to be misread."""
    spec = shipped_vllm_spec("0.32.0")
    options = [
        o
        for o in spec.options
        if o.kind in (ValueKind.WORD, ValueKind.TEXT, ValueKind.FLAG, ValueKind.BOOL) and o.nargs in (None, 0)
    ]
    rng = random.Random(23)
    out: list[CanonicalCommand] = []
    while len(out) < count:
        tokens: list[str] = []
        for option in rng.sample(options, 3):
            if not option.takes_value:
                tokens.append(option.name)
            else:
                tokens.append(f"{option.name}={rng.choice(TRICKY)}")
        try:
            out.append(canonical_command(["vllm", "serve", "org/model", *tokens], "vllm", POLICY))
        except ArgumentPolicyError:
            continue
    return out


def test_vllm_reads_the_rendered_argv_as_judged() -> None:
    """Over 150 accepted commands, vLLM's own parser sets exactly the judged options to the judged strings."""
    python = vllm_cpu_python()
    if not python.exists():
        pytest.skip(f"no vLLM environment at {python} (deploy/install-vllm-cpu.sh)")
    commands = _commands(150)
    argvs = [["serve", *recipe_tokens(c)[0]][1:] for c in commands]
    result = subprocess.run(
        [str(python), "-c", PARSE], input=json.dumps(argvs), capture_output=True, text=True, timeout=300, check=True
    )
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    raws = {s: raw for raw in json.loads(_dump())["options"] for s in raw["option_strings"]}
    dests = {s: raw["dest"] for s, raw in raws.items()}
    for command, got in zip(commands, parsed, strict=True):
        assert got is not None, recipe_tokens(command)[0]
        judged = {dests[o.name] for o in command.options if o.enabled or o.spec.kind == ValueKind.BOOL}
        assert set(got) - {"model_tag", "model"} <= judged, (recipe_tokens(command)[0], got)
        assert "trust_remote_code" not in got or "trust_remote_code" in judged
        assert "host" not in got
        for option in command.options:
            plain = raws[option.name]["type"] in ("str", None)  # others convert (a list of names, a number)
            if option.spec.kind in (ValueKind.WORD, ValueKind.TEXT) and option.values and plain:
                assert got[dests[option.name]] == option.values[0], (option.name, got)


def _dump() -> str:
    from importlib import resources

    return resources.files("farm.engines.vllm").joinpath("vllm_serve_args_0.32.0.json").read_text(encoding="utf-8")
