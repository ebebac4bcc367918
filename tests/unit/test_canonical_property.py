"""Properties of the canonical command, over generated argvs: parsing never fails with anything but the farm's
own error, and the canonical rendering is a fixed point (what is launched parses to exactly what was judged)."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from farm.engines.argspec import ParsedOption, ValueKind
from farm.engines.policy import canonical_command
from farm.engines.vllm.spec import shipped_vllm_spec
from farm.errors import ArgumentPolicyError

SPEC = shipped_vllm_spec()
SPELLINGS = sorted({s for o in SPEC.options for s in (o.name, *o.aliases)})
WORDS = ["auto", "fp8", "hermes", "x1", "org/model"]
VALUE_OF = {
    ValueKind.INT: st.integers(1, 4096).map(str),
    ValueKind.INT_OR_AUTO: st.integers(1, 4096).map(str),
    ValueKind.FLOAT: st.floats(0.01, 0.99).map(lambda f: f"{f:.2f}"),
    ValueKind.WORD: st.sampled_from(WORDS),
    ValueKind.TEXT: st.sampled_from(WORDS),
    ValueKind.REPO: st.sampled_from(["org/model", "/models/m"]),
    ValueKind.PATH: st.just("/models/p"),
    ValueKind.JSON: st.builds(
        json.dumps, st.dictionaries(st.sampled_from(["method", "level", "num_speculative_tokens"]), st.integers(0, 9))
    ),
}
SIMPLE = [o for o in SPEC.options if o.kind in (*VALUE_OF, ValueKind.FLAG, ValueKind.BOOL, ValueKind.CHOICE)]
SIMPLE = [o for o in SIMPLE if o.nargs in (None, 0) and o.name not in ("--model", "--tensor-parallel-size")]


@st.composite
def option_tokens(draw: st.DrawFn) -> list[str]:
    """One option in one of its spellings, with a value of its kind."""
    option = draw(st.sampled_from(SIMPLE))
    spelling = draw(st.sampled_from((option.name, *option.aliases)))
    if spelling.startswith("--") and draw(st.booleans()):
        spelling = "--" + spelling[2:].replace("-", "_")
    if option.kind == ValueKind.FLAG:
        return [spelling]
    if option.kind == ValueKind.BOOL:
        return [draw(st.sampled_from([spelling, "--no-" + option.name[2:]]))]
    value = draw(
        st.sampled_from(option.choices or ("x",)) if option.kind == ValueKind.CHOICE else VALUE_OF[option.kind]
    )
    return [f"{spelling}={value}"] if draw(st.booleans()) else [spelling, value]


TOKENS = st.lists(
    st.one_of(
        option_tokens(),
        option_tokens(),
        option_tokens(),
        st.sampled_from(SPELLINGS).map(lambda s: [s]),
        st.text(max_size=8).map(lambda t: [t]),
    ),
    max_size=8,
).map(lambda groups: [token for group in groups for token in group])


@settings(max_examples=400, deadline=None)
@given(TOKENS)
def test_parsing_fails_only_with_the_farms_error(tokens: list[str]) -> None:
    """Any argv either parses or is refused with ArgumentPolicyError; nothing else escapes."""
    with contextlib.suppress(ArgumentPolicyError):
        canonical_command(["vllm", "serve", "org/model", *tokens], "vllm")


@settings(max_examples=400, deadline=None)
@given(TOKENS)
def test_the_rendered_command_parses_to_what_was_judged(tokens: list[str]) -> None:
    """Whenever an argv is accepted, its rendering is accepted too and parses to the same values."""
    try:
        command = canonical_command(["vllm", "serve", "org/model", *tokens], "vllm")
    except ArgumentPolicyError:
        return
    rendered = ["vllm", "serve", command.model or "org/model", *command.render_options()]
    again = canonical_command(rendered, "vllm")
    assert again.model == command.model
    assert [_meaning(o) for o in again.options] == [_meaning(o) for o in command.options]
    assert again.render_options() == command.render_options()


def _meaning(option: ParsedOption) -> tuple[object, ...]:
    """What the engine reads from an option: its name, its value (JSON as parsed), and whether it is on."""
    values = option.values if option.json_value is None else ()
    return (option.name, values, option.enabled, json.dumps(option.json_value, sort_keys=True))
