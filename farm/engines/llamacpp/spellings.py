"""Commands written for an older llama-server, in the spellings a current one takes.

Recipes record the llama-server (or llama-bench) they ran: older builds read `-fa` as a bare switch, and
llama-bench writes `-fa 1`; current llama-server takes `-fa on|off|auto` and refuses a bare `--flash-attn`
(common/arg.cpp, is_truthy / is_falsey / is_autoy). Current builds also dropped `--mmap`, `--no-mmap` and
`--mlock` for `--load-mode` (auto, none, mmap, mlock, mmap+mlock, dio). `current_spellings_for` builds the
rewrite a spec applies before parsing (farm.engines.argspec.ArgSpec.current_spellings), from the option strings of
the dump it judges with: a spec whose server still has the old spelling gets no rewrite for it.

What the rewrite produces is then parsed and judged like any command, so a value it does not know (`-fa yes`)
is refused by the spec's choices, not guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

WORD_VALUES: Mapping[str, str] = {
    "on": "on",
    "enabled": "on",
    "true": "on",
    "1": "on",
    "off": "off",
    "disabled": "off",
    "false": "off",
    "0": "off",
    "auto": "auto",
    "-1": "auto",
}
"""What llama.cpp reads as on, off and auto, to the word current llama-server prints in its help."""

BARE_MEANS_ON = ("--flash-attn",)
"""Options older builds read as a bare switch: alone, they mean `on`."""

LOAD_MODE_SWITCHES = ("--mmap", "--no-mmap", "--mlock")
"""The switches `--load-mode` replaced."""


def load_mode(mmap: bool, mlock: bool) -> str:
    """`--load-mode` for what the older switches said (mmap on unless `--no-mmap`)."""
    if mmap:
        return "mmap+mlock" if mlock else "mmap"
    return "mlock" if mlock else "none"


def current_spellings_for(
    spellings: Mapping[str, str], word_options: Collection[str]
) -> Callable[[Sequence[str]], list[str]] | None:
    """The rewrite for a dump: `spellings` maps each option string it knows to its canonical name, `word_options`
    are its options that take on/off/auto. None when the dump needs none (an older server)."""
    bare = tuple(name for name in BARE_MEANS_ON if name in word_options)
    replaces_load_switches = "--load-mode" in spellings.values() and not any(s in spellings for s in LOAD_MODE_SWITCHES)
    if not word_options and not replaces_load_switches:
        return None

    def rewrite(args: Sequence[str]) -> list[str]:
        out: list[str] = []
        mmap, mlock, load_switch = True, False, False
        i = 0
        while i < len(args):
            token = args[i]
            i += 1
            name, eq, inline = token.partition("=")
            canonical = spellings.get(name)
            if canonical is not None and canonical in word_options:
                value: str | None = inline if eq else None
                if value is None and i < len(args) and args[i].lower() in WORD_VALUES:
                    value = args[i]
                    i += 1
                if value is None and canonical in bare:
                    value = "on"
                if value is None:
                    out.append(token)  # left for the parser to refuse (it needs a value)
                    continue
                out += [canonical, WORD_VALUES.get(value.lower(), value)]
                continue
            if replaces_load_switches and not eq and name in LOAD_MODE_SWITCHES:
                load_switch = True
                if name == "--mlock":
                    mlock = True
                else:
                    mmap = name == "--mmap"
                continue
            out.append(token)
        if load_switch:
            out += ["--load-mode", load_mode(mmap, mlock)]
        return out

    return rewrite
