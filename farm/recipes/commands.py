"""Launch commands as recipes write them, read into one canonical form per engine.

A recipe may spell its engine `vLLM` or `llama-cpp`, start its command with `VAR=value` words, run vLLM as
`python -m vllm.entrypoints.openai.api_server --model M`, give a container's arguments with or without the
`serve` subcommand, or lose the quotes of a JSON value in a badly tokenized copy. This module turns each of
those into `(engine, argv, environment)` where argv starts with the engine's canonical launcher
(farm.recipes.model.ENGINE_LAUNCHERS), carries exactly one subcommand, keeps JSON values whole, and holds no
environment words. Every refusal is a RecipeError naming the file and the field.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from farm.engines.registry import ALIASES, ENGINES
from farm.errors import RecipeError
from farm.recipes import instances
from farm.recipes.model import ENGINE_LAUNCHERS, KNOWN_ENGINES, POSITIONAL_MODEL_ENGINES
from farm.recipes.pasted_words import one_word_remark, rejoin_split_paths

ENGINE_ALIASES: Mapping[str, str] = ALIASES
"""Engine names as recipes spell them (compared lowercased, trimmed), to the farm's canonical name: the table's
one alias table (farm.engines.registry.ALIASES)."""

MODEL_FLAGS: dict[str, tuple[str, ...]] = {name: kind.model_flags for name, kind in ENGINES.items() if kind.model_flags}
"""Flags that name the model an engine serves (the first is what the engine's docs use)."""

NOT_SERVERS: dict[str, str] = {name: what for kind in ENGINES.values() for name, what in kind.not_servers.items()}
"""Executables recipes name that do not start a server, with what they are (each engine's `not_servers`)."""

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_PYTHON_MODULES = {module: name for name, kind in ENGINES.items() for module in kind.python_modules}

MAX_ARGV_TOKENS = 1024
"""More tokens than any real server command; a longer list is pasted prose, not a command."""
MAX_TOKEN_CHARS = 65_536
"""One argument; JSON configs run to a few kilobytes."""


@dataclass(frozen=True)
class Command:
    """A launch command read from one field: the engine it starts, its canonical argv and its environment."""

    engine: str
    argv: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    source_field: str = ""
    source_tokens: tuple[str, ...] = ()
    model: str | None = None
    """A command built from engine + model: the model it serves, when argv does not name it."""
    model_source: str | None = None
    notes: tuple[str, ...] = ()
    """What was changed on the way to the canonical argv (a translation, a model named by its instance)."""
    reshaped: bool = False
    """Whether the arguments are read otherwise than they were pasted (chat text cut, a split path joined, a
    wrapper looked through): a container launch then runs the arguments as read, never the paste."""


def canonical_engine(name: object, source: str, field_name: str) -> str:
    """The canonical engine name for a recipe's spelling of it (case-insensitive, with known aliases)."""
    if not isinstance(name, str) or not name.strip():
        raise RecipeError(f"expected a non-empty string, got {name!r}", source=source, field=field_name)
    canonical = ENGINE_ALIASES.get(name.strip().lower())
    if canonical is None or canonical not in KNOWN_ENGINES:
        known = ", ".join(sorted(KNOWN_ENGINES))
        raise RecipeError(f"unknown engine {name!r} (known: {known})", source=source, field=field_name)
    return canonical


def is_placeholder(command: str) -> bool:
    """A recorded 'command' that is not one: empty, or a note such as `# Remote endpoint: http://...`."""
    stripped = command.strip()
    return not stripped or stripped.startswith("#")


def split_command(text: str, source: str, field_name: str) -> list[str]:
    """A command line split as a POSIX shell would, except that a JSON value written without shell quotes
    (`--speculative-config {"method":"mtp"}`, as people paste commands) is kept as the JSON it means: a shell
    would strip its double quotes, which is how the registry's token lists lost theirs."""
    # A backslash at the end of a line continues the command on the next one (a shell drops both): commands pasted
    # from a script or a README are written that way.
    protected, values = _protect_json(re.sub(r"\\\r?\n", " ", text))
    try:
        tokens = shlex.split(protected)
    except ValueError as exc:
        raise RecipeError(f"the command line does not parse: {exc}", source=source, field=field_name) from exc
    for index, value in enumerate(values):
        marker = _JSON_MARKER.format(index)
        tokens = [token.replace(marker, value) for token in tokens]
    return tokens


_JSON_MARKER = "\x00json{}\x00"


def _protect_json(text: str) -> tuple[str, list[str]]:
    """The text with each unquoted, valid JSON object or array that holds double quotes replaced by a marker,
    and those JSON texts in order."""
    out: list[str] = []
    values: list[str] = []
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\" and quote == '"' and index + 1 < len(text):
                out.append(text[index : index + 2])
                index += 2
                continue
            if char == quote:
                quote = None
        elif char == "\\" and index + 1 < len(text):
            out.append(text[index : index + 2])
            index += 2
            continue
        elif char in "'\"":
            quote = char
        elif char in "{[" and (index == 0 or text[index - 1] in " \t=\n"):
            end = _json_end(text, index)
            if end is not None and '"' in text[index:end]:
                values.append(text[index:end])
                out.append(_JSON_MARKER.format(len(values) - 1))
                index = end
                continue
        out.append(char)
        index += 1
    return "".join(out), values


def _json_end(text: str, start: int) -> int | None:
    """The end of the balanced JSON value starting at `start`, if it parses as JSON and ends a word."""
    depth = 0
    in_string = escaped = False
    for index in range(start, min(len(text), start + MAX_TOKEN_CHARS)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                end = index + 1
                if end < len(text) and not text[end].isspace():
                    return None
                try:
                    json.loads(text[start:end])
                except (ValueError, RecursionError):
                    return None
                return end
    return None


def split_environment(tokens: Sequence[str], source: str, field_name: str) -> tuple[dict[str, str], list[str]]:
    """Leading `VAR=value` words (and an `env` prefix) as an environment, and the command after them."""
    environment: dict[str, str] = {}
    rest = list(tokens)
    if rest and rest[0] == "env":
        rest = rest[1:]
    while rest and _ENV_WORD.match(rest[0]):
        name, _, value = rest.pop(0).partition("=")
        environment[name] = value
    check_environment(environment, source, field_name)
    return environment, rest


_DOCKER_VALUE_OPTIONS = frozenset(
    {
        "-e", "--env", "-v", "--volume", "-p", "--publish", "--name", "--gpus", "--ipc", "--network", "--net",
        "--shm-size", "--runtime", "--device", "--ulimit", "-w", "--workdir", "-u", "--user", "--mount", "--cpus",
        "-m", "--memory", "--restart", "-l", "--label", "--hostname", "-h", "--platform", "--pull", "--cap-add",
        "--cap-drop", "--security-opt", "--group-add", "--add-host", "--dns", "--cpuset-cpus", "--memory-swap",
        "--pid", "--uts", "--log-driver", "--log-opt", "--stop-timeout", "--health-cmd", "--env-file",
        "--entrypoint",
    }
)  # fmt: skip
"""`docker run` options that take a value (docker/cli, `docker run --help`); the others are switches."""
_DOCKER_SWITCHES = frozenset(
    {"-d", "--detach", "-i", "--interactive", "-t", "--tty", "-it", "-ti", "--rm", "--privileged", "--init", "-P"}
)
_DOCKER_REFUSED = {
    "--entrypoint": "replaces the image's entrypoint: what it runs is not the engine's server",
    "--env-file": "reads variables from a file the recipe does not carry",
}
_IMAGE_ENGINES = tuple(
    (re.compile(pattern), kind.name) for kind in ENGINES.values() for pattern in kind.official_images
)
"""Engines' official images (each engine's `official_images`), and the engine each runs: vLLM's and llama.cpp's
`server` images start the server (their arguments are its arguments); SGLang's takes the whole command."""


def image_engine(image: str) -> str | None:
    """The engine an official engine image runs, or None for any other image."""
    return next((name for pattern, name in _IMAGE_ENGINES if pattern.match(image)), None)


def engine_of_the_image(declared: str, image: object, arguments: object) -> str | None:
    """Rule "another engine's image and arguments": the engine a docker launch ran where the recipe's engine name
    says another, or None. Both must say it: the image is that engine's official image (lmsysorg/sglang) and the
    arguments name the model with that engine's own model option (`--model-path`), never the declared engine's.
    One of the two alone (an SGLang image given vLLM arguments, a stray option) proves nothing and changes nothing."""
    if not isinstance(image, str) or not isinstance(arguments, list):
        return None
    other = image_engine(image)
    if other is None or other == declared:
        return None
    names = {str(argument).partition("=")[0] for argument in arguments}
    theirs = set(MODEL_FLAGS.get(other, ())) - set(MODEL_FLAGS.get(declared, ()))
    if names & theirs and not names & set(MODEL_FLAGS.get(declared, ())):
        return other
    return None


def is_docker_run(tokens: Sequence[str]) -> bool:
    rest = list(tokens)
    while rest and _ENV_WORD.match(rest[0]):
        rest.pop(0)
    return len(rest) > 1 and executable_name(rest[0]) in ("docker", "podman") and rest[1] == "run"


def from_docker_run(tokens: Sequence[str], engine: str, source: str, field_name: str) -> Command:
    """A `docker run ... IMAGE ARGS` command (as LocalMaxxing records some runs) read as the engine command the
    container ran: the arguments after an official engine image, with its `-e` variables as the environment.

    The container itself (image tag, mounts of the submitter's directories, device flags) is the submitter's
    machine: the worker runs the judged command its own way. A path the arguments name inside the container
    (`--model /model`, mounted from the submitter's disk) then stands for the recipe's instance like any other
    local path (resolve_model). An `--entrypoint` or an image that is not the engine's official one is refused:
    what it runs cannot be judged."""
    rest = list(tokens)
    client_words = []
    while rest and _ENV_WORD.match(rest[0]):
        client_words.append(rest.pop(0).partition("=")[0])
    rest = rest[2:]
    environment: dict[str, str] = {}
    index = 0
    while index < len(rest) and rest[index].startswith("-"):
        name, equals, inline = rest[index].partition("=")
        if name in _DOCKER_REFUSED:
            raise RecipeError(f"docker run {name}: {_DOCKER_REFUSED[name]}", source=source, field=field_name)
        if name in _DOCKER_VALUE_OPTIONS:
            value = inline if equals else (rest[index + 1] if index + 1 < len(rest) else "")
            index += 1 if equals else 2
            if name in ("-e", "--env"):
                key, has_value, env_value = value.partition("=")
                if has_value:
                    environment[key] = env_value
            continue
        if name not in _DOCKER_SWITCHES:
            raise RecipeError(f"docker run option {name!r} is not one the farm reads", source=source, field=field_name)
        index += 1
    if index >= len(rest):
        raise RecipeError("a docker run without an image", source=source, field=field_name)
    image, arguments = rest[index], rest[index + 1 :]
    runs = image_engine(image)
    if runs is not None and runs != engine:
        raise RecipeError(
            f"a docker run of {image!r}, which runs {runs}, not the recipe's engine {engine}",
            source=source,
            field=field_name,
        )
    if runs is None:
        raise RecipeError(
            f"a docker run of {image!r}, which is not {engine}'s official image: what its entrypoint runs cannot "
            "be judged",
            source=source,
            field=field_name,
        )
    command = read_command(
        arguments, source, field_name, declared_engine=engine, arguments_only=runs is None or not _whole_command(runs)
    )
    return Command(
        engine=command.engine,
        argv=command.argv,
        environment={**check_environment(environment, source, field_name), **command.environment},
        source_field=field_name,
        source_tokens=tuple(tokens),
        notes=(
            f"read from a docker run of {image}: the engine's arguments and -e variables; the worker runs them"
            + (
                f" (the docker client's own variables {', '.join(client_words)} are not the engine's)"
                if client_words
                else ""
            ),
        ),
    )


def check_environment(environment: Mapping[str, object], source: str, field_name: str) -> dict[str, str]:
    """Variable names that a shell accepts and values that are plain strings."""
    checked: dict[str, str] = {}
    for name, value in environment.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise RecipeError(f"{name!r} is not a variable name", source=source, field=field_name)
        if not isinstance(value, str):
            raise RecipeError(f"{name} must be a string, got {value!r}", source=source, field=f"{field_name}.{name}")
        checked[name] = value
    return checked


def json_damage(tokens: Sequence[str]) -> list[int]:
    """Indexes of tokens that look like JSON (start with `{` or `[`, alone or after `--opt=`) but do not parse:
    what a copy that lost its quotes leaves (`{method:dspark}`)."""
    damaged = []
    for index, token in enumerate(tokens):
        value = token
        if token.startswith("-") and "=" in token:
            value = token.partition("=")[2]
        value = value.strip()
        if not value.startswith(("{", "[")):
            continue
        try:
            json.loads(value)
        except (ValueError, RecursionError):
            damaged.append(index)
    return damaged


_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_BARE_SCALAR = re.compile(r"[A-Za-z0-9_.+/-]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def repair_unquoted_json(text: str) -> str | None:
    """The JSON a value that lost all its quotes was (`{method:mtp,num_speculative_tokens:4}` ->
    `{"method":"mtp","num_speculative_tokens":4}`), when it has exactly one reading; None otherwise.

    One reading only: objects and lists of bare keys (identifiers) and bare scalars, with no quote left, no space,
    and no scalar holding a character JSON would need quoted to mean something else (`:`, `,`, brackets). A number,
    `true`, `false` and `null` are JSON's own (a quote-less copy cannot have lost quotes around them, since the
    engines' configs take them unquoted), any other word is a string. Anything else (a remark in brackets, prose,
    a value with spaces) has no such reading: None, and the token is refused as it was."""
    if not text.startswith(("{", "[")) or any(ch in text for ch in "\"' \t\n\\"):
        return None
    position = 0

    def value() -> object:
        nonlocal position
        if position >= len(text):
            raise ValueError("end")
        if text[position] == "{":
            position += 1
            members: dict[str, object] = {}
            if text[position : position + 1] == "}":
                position += 1
                return members
            while True:
                key = _BARE_KEY.match(text, position)
                if key is None or text[key.end() : key.end() + 1] != ":" or key.group() in members:
                    raise ValueError("key")
                position = key.end() + 1
                members[key.group()] = value()
                if text[position : position + 1] == ",":
                    position += 1
                    continue
                if text[position : position + 1] == "}":
                    position += 1
                    return members
                raise ValueError("object")
        if text[position] == "[":
            position += 1
            items: list[object] = []
            if text[position : position + 1] == "]":
                position += 1
                return items
            while True:
                items.append(value())
                if text[position : position + 1] == ",":
                    position += 1
                    continue
                if text[position : position + 1] == "]":
                    position += 1
                    return items
                raise ValueError("list")
        word = _BARE_SCALAR.match(text, position)
        if word is None:
            raise ValueError("scalar")
        position = word.end()
        literal = word.group()
        if _NUMBER.fullmatch(literal):
            return json.loads(literal)
        return {"true": True, "false": False, "null": None}.get(literal, literal)

    try:
        parsed = value()
    except (ValueError, IndexError):
        return None
    if position != len(text):
        return None
    return json.dumps(parsed, separators=(",", ":"))


_LABEL = re.compile(r"^(?:command|cmd|args|run|launch|server)s?:$", re.IGNORECASE)
"""A label a paste puts before its command (`command: vllm serve ...`, `args: --model ...`)."""


def around_a_command(tokens: Sequence[str]) -> tuple[list[str], list[str]]:
    """The tokens without the chat text a paste put around a complete command, and what was cut (for a note):
    a leading label (`command:`), and a closing remark in parentheses or brackets (`(4x DGX Spark GB10, RoCE)`,
    `[edit: fixed the port]`) after the last option's value, or one before the command (`(on the 3090 box) vllm
    serve ...`). A closing remark is cut only when it is the whole tail, opens with `(` or `[` and closes with `)`
    or `]`, spans more than one word (a one-word `[gpu]` or `[1,2]` may be a value: read_command cuts a one-word
    remark only where the engine's parser would find it stray, one_word_remark) and holds no option; anything else
    is left whole, for read_command to judge."""
    rest = list(tokens)
    cut: list[str] = []
    if len(rest) > 1 and _LABEL.match(rest[0]):
        cut.append(rest.pop(0))
    if rest and re.match(r"^[(\[][A-Za-z]", rest[0]):
        # a remark before the command (`(on the 3090 box) vllm serve ...`, `[Edited to fix the tag] MODEL ...`):
        # cut when it spans more than one word or what follows it starts a server or an option
        for end, word in enumerate(rest):
            if word.endswith((")", "]")):
                after = rest[end + 1 :]
                shell = any(re.search(r"&&|\|\||[;|`$]", part) for part in rest[: end + 1])
                if after and not shell and (end > 0 or starts_a_server(after) or _OPTION_LIKE.match(after[0])):
                    cut.append(" ".join(rest[: end + 1]))
                    rest = after
                break
    for start in range(1, len(rest)):
        head, tail = rest[start], rest[start:]
        if not head.startswith(("(", "[")) or len(tail) < 2 or not tail[-1].endswith((")", "]", ")```", "]```")):
            continue
        if any(_OPTION_LIKE.match(word) for word in tail) or head[1:2] in ('"', "{"):
            break
        cut.append(" ".join(tail))
        rest = rest[:start]
        break
    return rest, cut


_SHELLS = frozenset({"bash", "sh", "dash", "zsh"})
_SCRIPT_FLAGS = frozenset({"-c", "-lc", "-ec", "-xc", "-euc", "-lec", "-elc"})
_SHELL_OPTIONS = re.compile(r"^(?:-[euxo]+|\+[eux]+|pipefail)$")
_STEP_SEPARATORS = frozenset({";", "&&"})


def through_a_wrapper(tokens: Sequence[str]) -> tuple[list[str], str | None]:
    """Rule "a wrapper that execs the server": a shell script that only sets the environment and then runs the
    server (`bash -c 'export CUDA_DEVICE_ORDER=PCI_BUS_ID; exec vllm serve ...'`, a container's `-c SCRIPT`, or
    `CUDA_DEVICE_ORDER=PCI_BUS_ID exec llama-server ...`) is read as that server command with those variables
    (judged like any recipe's), and the wrapper is named in a note; it is never run. A script with any other step
    (a patch, an install, `unset`, `cd`, a pipe, a loop) is returned as given, for the refusal of scripts."""
    rest = list(tokens)
    script: str | None = None
    if len(rest) == 3 and executable_name(rest[0]) in _SHELLS and rest[1] in _SCRIPT_FLAGS:
        script, wrapper = rest[2], f"{rest[0]} {rest[1]}"
    elif len(rest) == 2 and rest[0] in _SCRIPT_FLAGS:
        script, wrapper = rest[1], f"the shell's {rest[0]}"
    if script is None:
        words = 0
        while words < len(rest) and _ENV_WORD.match(rest[words]):
            words += 1
        if words < len(rest) - 1 and rest[words] == "exec" and starts_a_server(rest[words + 1 :]):
            return [*rest[:words], *rest[words + 1 :]], "`exec` before the server only replaces the shell: left out"
        return rest, None
    try:
        lexer = shlex.shlex(script.replace("\\\n", " ").replace("\n", " ; "), posix=True, punctuation_chars=";&")
        lexer.whitespace_split = True
        lexer.commenters = ""
        words_of_script = list(lexer)
    except ValueError:
        return rest, None
    if any(re.search(r"[$`<>]", word) for word in words_of_script):
        return rest, None  # expansions and redirections: what ran depends on the shell, not on the words
    steps: list[list[str]] = [[]]
    for word in words_of_script:
        if word in _STEP_SEPARATORS:
            steps.append([])
        elif set(word) <= set(";&|"):
            return rest, None  # `&`, `||`, `|`: not a plain sequence of steps
        else:
            steps[-1].append(word)
    steps = [step for step in steps if step]
    if not steps:
        return rest, None
    environment: list[str] = []
    for step in steps[:-1]:
        if step[0] == "set" and all(_SHELL_OPTIONS.match(word) for word in step[1:]):
            continue
        assignments = step[1:] if step[0] == "export" else step
        if not assignments or not all(_ENV_WORD.match(word) for word in assignments):
            return rest, None
        environment += assignments
    server = steps[-1][1:] if steps[-1][0] == "exec" else steps[-1]
    leading = 0
    while leading < len(server) and _ENV_WORD.match(server[leading]):
        leading += 1
    if not starts_a_server(server[leading:]):
        return rest, None
    shown = ", ".join(word.partition("=")[0] for word in environment)
    if shown:
        note = (
            f"{wrapper} is a wrapper that sets the environment ({shown}) and then execs the server: read as that "
            "server command, with those variables judged as the recipe's own; the wrapper is never run"
        )
    else:
        note = f"{wrapper} is a wrapper that execs the server: read as that server command; the wrapper is never run"
    return [*environment, *server], note


def read_command(
    tokens: Sequence[str],
    source: str,
    field_name: str,
    *,
    declared_engine: str | None,
    arguments_only: bool = False,
) -> Command:
    """Read a full command (`[VAR=v ...] executable [subcommand] args`) or, with `arguments_only`, the arguments a
    container entrypoint or draft launch gives (with or without a leading subcommand) into a Command."""
    original = tuple(tokens)
    tokens, chat = around_a_command(tokens)
    tokens, listed_environment = from_yaml_items(without_closing_fence(tokens))
    tokens = without_closing_fence(before_prose_fence(from_compose_list(tokens)))
    tokens, wrapped = through_a_wrapper(tokens)
    if len(tokens) > MAX_ARGV_TOKENS:
        raise RecipeError(
            f"{len(tokens)} tokens, more than {MAX_ARGV_TOKENS}: not a launch command", source=source, field=field_name
        )
    for index, token in enumerate(tokens):
        if len(token) > MAX_TOKEN_CHARS:
            raise RecipeError(
                f"token {index} is {len(token)} characters, more than {MAX_TOKEN_CHARS}",
                source=source,
                field=field_name,
            )
        if not token:
            raise RecipeError(f"token {index} is empty", source=source, field=field_name)
        if "```" in token:
            raise RecipeError(
                f"token {index} ({token[:40]!r}) holds a Markdown code fence: the command was copied out of a "
                "chat message with its formatting, so where it ends is unknown",
                source=source,
                field=field_name,
            )
    environment, rest = split_environment(tokens, source, field_name)
    environment = {**check_environment(listed_environment, source, field_name), **environment}
    if not rest:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=field_name)

    if arguments_only and rest[0] in ("-c", "-lc", "-ec", "-xc"):
        raise RecipeError(
            f"the arguments are a shell's {rest[0]} script (for an image whose entrypoint is a shell), not "
            f"{declared_engine or 'the engine'}'s arguments: the farm cannot judge a script",
            source=source,
            field=field_name,
        )
    if arguments_only and rest[0] in ("-v", "-e", "--env", "--gpus", "--volume", "-p", "--ipc", "--shm-size"):
        raise RecipeError(
            f"the arguments start with `docker run` options ({rest[0]} ...), not {declared_engine or 'the engine'}'s:"
            " the paste mixed the container's options with the command",
            source=source,
            field=field_name,
        )
    if arguments_only and not starts_a_server(rest):
        if declared_engine is None:
            raise RecipeError("arguments without an engine to run them", source=source, field=field_name)
        engine = declared_engine
        launcher = ENGINE_LAUNCHERS[engine]
        if len(launcher) > 1 and rest[0] == launcher[-1]:
            rest = rest[1:]  # `serve` given in the arguments already: one subcommand, not two
        args = rest
    else:
        engine, consumed = _launcher_of(rest, source, field_name)
        args = rest[consumed:]
    if declared_engine is not None and engine != declared_engine:
        raise RecipeError(
            f"executable {rest[0]!r} is {engine}, not the engine {declared_engine!r}", source=source, field=field_name
        )
    args, rejoined = rejoin_split_paths(engine, args)
    remark = one_word_remark(engine, args)
    if remark is not None:
        chat = [*chat, remark]
        args = args[:-1]
    argv = _canonical(engine, args, source, field_name)
    notes = tuple(f"chat text around the command was left out: {text[:100]!r}" for text in chat)
    return Command(
        engine=engine,
        argv=tuple(argv),
        environment=environment,
        source_field=field_name,
        source_tokens=original,
        notes=(*notes, *rejoined, *([wrapped] if wrapped else [])),
        reshaped=bool(chat or rejoined or wrapped),
    )


_OPTIONAL_POSITIONAL_MODEL = frozenset(name for name, kind in ENGINES.items() if kind.optional_positional_model)
"""Engines whose command may name its model as the first argument (LM Studio's `lms load MODEL`), or none."""

_OPTION_LIKE = re.compile(r"^-{1,2}[A-Za-z]")
_COMPOSE_KEY = re.compile(
    r"^(ipc|shm_size|cpuset|ulimits|memlock|stack|nofile|soft|hard|restart|init|tty|stdin_open|deploy|resources|"
    r"reservations|devices|driver|device_ids|count|capabilities|runtime|network_mode|gpus):$"
)
"""Keys of a compose service that only say how its container runs, which a flattened `command:` list can be
followed by when a chat message pastes the service (`ipc: host`, `shm_size: 32g`, `ulimits: memlock: -1`,
`deploy: resources: reservations: devices: - driver: nvidia device_ids: ["1","2"] capabilities: [gpu]`)."""

_YAML_FLOW_LIST = re.compile(r"^\[[\w\",. -]*\]$")
"""A YAML flow list as a compose key's value (`[gpu]`, `["1","2"]`)."""


def from_compose_list(tokens: Sequence[str]) -> list[str]:
    """The options of a compose service's `command:` list that a registry copy flattened with its list markers
    (`--tp=8`, `-`, `--trust-remote-code`, `-`, ... `ipc:`, `host`, `shm_size:`, `32g`).

    Read as a list only when it is one beyond doubt: at least three items, every item an option (`--x` or
    `--x=value`) followed by a lone `-` marker except the last, and nothing after the last item but the service's
    own container keys (_COMPOSE_KEY) with their plain values and a closing fence. Those keys are left out: the
    worker runs the container its own way (ipc, shm and ulimits come from the recipe's container launch fields).
    Anything else is returned whole, for read_command to judge (a stray `-` is then refused)."""
    items: list[str] = []
    index = 0
    while index < len(tokens) and tokens[index].startswith("--"):
        items.append(tokens[index])
        index += 1
        if index < len(tokens) and tokens[index] == "-":
            index += 1
        else:
            break
    markers = index - len(items)
    if len(items) < 3 or markers < len(items) - 1 or markers < 2:
        return list(tokens)
    rest = tokens[index:]
    if rest and not _COMPOSE_KEY.match(rest[0]):
        return list(tokens)
    for position, word in enumerate(rest):
        if position and rest[position - 1].endswith(":") and _YAML_FLOW_LIST.match(word):
            continue  # a key's flow-list value (`capabilities: [gpu]`)
        if word != _FENCE and (word.startswith("--") or word.startswith(("{", "[")) or "=" in word):
            return list(tokens)
        if word.endswith(":") and not _COMPOSE_KEY.match(word):
            return list(tokens)
    return items


def from_yaml_items(tokens: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The arguments of a container spec's `args:` list that a registry copy flattened with a `-` before every
    item (`-`, `--model`, `-`, `/models/x`, `-`, `--tensor-parallel-size`, `-`, `4`), and the `env:` list that may
    follow it (`env:`, `-`, `name:`, `X`, `value:`, `"1"`) as an environment.

    Read as such only beyond doubt: the list starts with `-`, every other token is `-` for at least three items,
    and what follows the items is nothing or one whole `env:` list of name/value pairs. Anything else is returned
    whole, for read_command to judge."""
    items: list[str] = []
    index = 0
    while index + 1 < len(tokens) and tokens[index] == "-" and not tokens[index + 1].endswith(":"):
        items.append(tokens[index + 1])
        index += 2
    rest = list(tokens[index:])
    if len(items) < 3 or not any(item.startswith("--") for item in items):
        return list(tokens), {}
    environment: dict[str, str] = {}
    if rest:
        if rest[0] != "env:" or (len(rest) - 1) % 5:
            return list(tokens), {}
        for start in range(1, len(rest), 5):
            marker, name_key, name, value_key, value = rest[start : start + 5]
            if (marker, name_key, value_key) != ("-", "name:", "value:"):
                return list(tokens), {}
            environment[name] = value.strip("'\"")
    return items, environment


_FENCE = "```"
_PROSE_WORD = re.compile(r"^[A-Za-z][a-z']*[:,.!]?$")


def before_prose_fence(tokens: Sequence[str]) -> list[str]:
    """The tokens before a Markdown fence line that closes the command when what follows it is prose.

    A command pasted from a chat message often goes on past its closing fence with the message's text
    ("``` My command is pretty straightforward"). The cut is made only at a token that is exactly "```" (a fence
    line) or "`" (inline code closing) with a command before it, only when the first word after it is a plain
    word ("My", "Returns", "it's"; not a path, a model or a number) and nothing after it looks like an option
    (`-x`, `--opt`) or like JSON: then the rest is prose. Anything less clear is left whole, and read_command
    refuses the fence.

    A fence glued to the end of a word ("--port 8000```") closes the code block beyond doubt, whatever follows:
    the command is what comes before it, and that word without the fence."""
    for index, word in enumerate(tokens):
        if word.endswith(_FENCE) and word.strip("`"):
            return [*tokens[:index], word[: -len(_FENCE)]]
        if word not in (_FENCE, "`"):
            continue
        rest = tokens[index + 1 :]
        if index == 0 or not rest or not _PROSE_WORD.match(rest[0]):
            return list(tokens)
        if any(_OPTION_LIKE.match(word) or word.startswith(("{", "[")) for word in rest):
            return list(tokens)
        return list(tokens[:index])
    return list(tokens)


def without_closing_fence(tokens: Sequence[str]) -> list[str]:
    """The tokens without a Markdown code fence that closes them (a last token "```" or a last token ending in
    it), which commands copied out of chat messages carry; a fence anywhere else is refused by read_command."""
    rest = list(tokens)
    if rest and rest[-1] == "```":
        rest.pop()
    elif rest and rest[-1].endswith("```") and rest[-1] != "```":
        rest[-1] = rest[-1][: -len("```")]
    return rest


_SERVER_SPELLINGS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    sorted(
        (
            (kind.name, spelling)
            for kind in ENGINES.values()
            for spelling in (kind.launcher, *kind.launcher_spellings)
            if not _PYTHON.match(spelling[0])
        ),
        key=lambda item: -len(item[1]),
    )
)
"""Each engine's server commands that start with its own executable (its `launcher` and `launcher_spellings`),
longest first, so that `lms server start` is read before `lms server`."""
_SCRIPT_LAUNCHERS = {
    kind.launcher[1]: kind.name
    for kind in ENGINES.values()
    if kind.launcher[:1] == ("python",) and kind.launcher[1] != "-m"
}
"""Engines started as `python SCRIPT` (TabbyAPI's `python main.py`), by script name."""
_ENGINE_WORDS = frozenset(spelling[0] for _, spelling in _SERVER_SPELLINGS)
_PYTHON_PACKAGES = tuple(f"{kind.python_package}." for kind in ENGINES.values() if kind.python_package)
"""Python packages whose every module names their engine in a recorded line (`sglang.srt...`)."""
_SUBCOMMAND_EXECUTABLES = {kind.launcher: kind for kind in ENGINES.values() if kind.other_subcommands}
"""Launchers whose executable runs other subcommands too, none of them a server (`vllm bench`)."""


def _whole_command(engine: str) -> bool:
    """Whether the engine's images take a whole command as their arguments (they run no server of their own)."""
    images = ENGINES[engine].images if engine in ENGINES else None
    return images is not None and images.whole_command


def mentions_an_engine(tokens: Sequence[str]) -> bool:
    """Whether a recorded line names an engine's server anywhere (behind a wrapper such as `nohup` or `uv run`, or
    as a Python module), as opposed to a note or a script that serves nothing."""
    return any(
        executable_name(token) in _ENGINE_WORDS or token in _PYTHON_MODULES or token.startswith(_PYTHON_PACKAGES)
        for token in tokens
    )


def starts_a_server(tokens: Sequence[str]) -> bool:
    """Whether the tokens start with a known engine's server command."""
    if not tokens:
        return False
    try:
        _launcher_of(tokens, "", "")
    except RecipeError:
        return False
    return True


def executable_name(executable: str) -> str:
    """An executable's name, wherever it is and on any system: `./build/bin/llama-server`,
    `.\\llama.cpp\\llama-server.exe` and `llama-server` are all `llama-server`."""
    name = executable.replace("\\", "/").rsplit("/", 1)[-1]
    return name[: -len(".exe")] if name.lower().endswith(".exe") else name


def _launcher_of(tokens: Sequence[str], source: str, field_name: str) -> tuple[str, int]:
    """The engine a command starts and how many tokens its launcher takes (`vllm serve`: 2)."""
    executable = tokens[0]
    base = executable_name(executable)
    second = tokens[1] if len(tokens) > 1 else None
    if base in NOT_SERVERS:
        raise RecipeError(
            f"{base!r} is {NOT_SERVERS[base]}, not a server the farm can benchmark", source=source, field=field_name
        )
    if _PYTHON.match(base):
        if second == "-m" and len(tokens) > 2 and tokens[2] in _PYTHON_MODULES:
            return _PYTHON_MODULES[tokens[2]], 3
        if second is not None and posixpath.basename(second) in _SCRIPT_LAUNCHERS:
            return _SCRIPT_LAUNCHERS[posixpath.basename(second)], 2
        module = tokens[2] if second == "-m" and len(tokens) > 2 else second
        raise RecipeError(f"python runs {module!r}, which is no engine's server", source=source, field=field_name)
    for engine, spelling in _SERVER_SPELLINGS:
        if base == spelling[0] and tuple(tokens[1 : len(spelling)]) == spelling[1:]:
            return engine, len(spelling)
    for launcher in _SUBCOMMAND_EXECUTABLES:
        if base == launcher[0]:
            # an executable that runs other subcommands too (`vllm bench`, `vllm chat`), none of them a server
            expected = f"expected '{' '.join(launcher)} ...'"
            raise RecipeError(
                f"{expected}, got {second!r} after '{launcher[0]}'" if second else expected,
                source=source,
                field=field_name,
            )
    if ALIASES.get(executable.lower()) is not None and len(tokens) > 1:
        # `llama.cpp llama-server with -ngl 99, --jinja, reasoning off`: a note that names the engine, then its
        # settings in words; no shell runs an executable named after the engine
        raise RecipeError(
            f"{executable!r} is the engine's name, not an executable: the recorded line is a note about the run "
            f"({' '.join(tokens)[:80]!r}), not a command the farm can read",
            source=source,
            field=field_name,
        )
    if base in _SHELLS and second is not None and not second.startswith("-") and len(tokens) >= 2:
        raise RecipeError(
            f"runs the script {second!r} with {base}, which the recipe does not carry: what ran is in the script, "
            "which the farm can neither see nor judge",
            source=source,
            field=field_name,
        )
    if base in _SHELLS and second in _SCRIPT_FLAGS:
        raise RecipeError(
            f"a `{base} {second}` script that does more than set the environment and exec the server "
            f"({' '.join(tokens[2:3])[:80]!r}): what ran is the script, which the farm cannot judge",
            source=source,
            field=field_name,
        )
    if "--" in tokens[1:] and starts_a_server(tokens[tokens.index("--", 1) + 1 :]):
        # `toolbox run -c NAME -- llama-server ...`, `distrobox enter NAME -- ...`: the server runs inside another
        # environment (a container of the author's), whose build and settings the recipe does not show
        inner = tokens[tokens.index("--", 1) + 1]
        raise RecipeError(
            f"runs {executable_name(inner)!r} inside {' '.join(tokens[: tokens.index('--', 1)])[:80]!r}, an "
            "environment of the author's whose build the recipe does not show: the farm cannot tell which server "
            "ran",
            source=source,
            field=field_name,
        )
    known = ", ".join(" ".join(launcher) for launcher in ENGINE_LAUNCHERS.values())
    raise RecipeError(
        f"executable {executable!r} is not a known engine's server (known: {known})", source=source, field=field_name
    )


def _canonical(engine: str, args: Sequence[str], source: str, field_name: str) -> list[str]:
    """The engine's launcher, then (for positional-model engines) the one model, then the other arguments."""
    launcher = list(ENGINE_LAUNCHERS[engine])
    args = list(args)
    if engine not in POSITIONAL_MODEL_ENGINES:
        return [*launcher, *args]
    positional: str | None = None
    if args and not args[0].startswith("-"):
        positional = args.pop(0)
        if args and not args[0].startswith("-"):
            raise RecipeError(
                f"two arguments before the first option ({positional!r}, {args[0]!r}): {' '.join(launcher)} takes "
                "one model",
                source=source,
                field=field_name,
            )
    flags = MODEL_FLAGS.get(engine, ())
    flagged, rest = _pop_all(args, flags)
    if len(set(flagged)) > 1:
        raise RecipeError(
            f"names the model more than once, differently ({', '.join(map(repr, flagged))})",
            source=source,
            field=field_name,
        )
    if positional is not None and flagged and flagged[0] != positional:
        raise RecipeError(
            f"the positional model {positional!r} and {flags[0]} {flagged[0]!r} disagree",
            source=source,
            field=field_name,
        )
    model = positional if positional is not None else (flagged[0] if flagged else None)
    if model is None:
        other = _other_engines_model_option(engine, rest)
        if other is not None:
            raise RecipeError(
                f"names its model with {other}, which is not a {engine} option ({engine} takes the model as "
                f"{'the first argument or ' if engine in POSITIONAL_MODEL_ENGINES else ''}{flags[0]}): "
                "the arguments look like another engine's",
                source=source,
                field=field_name,
            )
        raise RecipeError("names no model (no positional model and no --model)", source=source, field=field_name)
    if model.startswith("-"):
        # moved to the positional slot, `--model=--trust-remote-code` would be read as an option
        raise RecipeError(
            f"the model {model!r} begins with '-': the engine would read it as an option",
            source=source,
            field=field_name,
        )
    return [*launcher, model, *rest]


def _other_engines_model_option(engine: str, args: Sequence[str]) -> str | None:
    """The model option of another engine that args use (`--model-path` in a vLLM command), if any."""
    own = set(MODEL_FLAGS.get(engine, ()))
    for other, names in MODEL_FLAGS.items():
        for name in names:
            if other != engine and name not in own and any(a == name or a.startswith(name + "=") for a in args):
                return name
    return None


def _pop_all(args: Sequence[str], names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Every value of the flags `names` (`--flag v` or `--flag=v`), and the arguments without them."""
    values: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        name, equals, value = token.partition("=")
        if name in names and equals:
            values.append(value)
        elif token in names and index + 1 < len(args):
            values.append(args[index + 1])
            index += 1
        else:
            rest.append(token)
        index += 1
    return values, rest


def model_in_argv(engine: str, argv: Sequence[str]) -> str | None:
    """The model an argv names (positional for vLLM and hipfire, a model flag for the others), if any."""
    launcher = ENGINE_LAUNCHERS[engine]
    args = list(argv[len(launcher) :])
    if engine in POSITIONAL_MODEL_ENGINES or engine in _OPTIONAL_POSITIONAL_MODEL:
        return args[0] if args and not args[0].startswith("-") else None
    values, _ = _pop_all(args, MODEL_FLAGS.get(engine, ()))
    return values[-1] if values else None


ENGINE_FLAG_OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    kind.name: dict(kind.registry_flags) for kind in ENGINES.values() if kind.registry_flags
}
"""How the registry's `metadata.localmaxxing.engine_flags` keys become each engine's options (each engine's
`registry_flags`)."""

_FLAGS_WITHOUT_OPTION = frozenset({"tensorParallel"})

_INHERENT_FLAGS: dict[tuple[str, str], Callable[[object], bool]] = {
    (kind.name, key): test for kind in ENGINES.values() for key, test in kind.inherent_flags.items()
}
"""engine_flags an engine always has that way, with no option to set (each engine's `inherent_flags`)."""
"""engine_flags keys that need no option where an engine has none for them (one device: nothing to split)."""


SERVING_OPTIONS: dict[str, dict[str, str]] = {kind.name: dict(kind.serving_options) for kind in ENGINES.values()}
"""How the registry's `serving` block (how the run was served) becomes each engine's options (its
`serving_options`)."""

_FLAG_OF_SERVING = {"tensor_parallel": "tensorParallel"}


def synthesize(
    engine: str,
    model: str | None,
    engine_flags: Mapping[str, object],
    source: str,
    field_name: str,
    *,
    serving: Mapping[str, object] | None = None,
    hardware_count: int = 1,
) -> tuple[str, ...]:
    """`engine + model + engine_flags` (and the `serving` block's parallelism and context length, where
    engine_flags leaves them out): the command a recipe means when it gives nothing else (model None: the host
    maps the recipe's model to its own file, so the command names none).

    An engine with no tensor-parallel option (llama.cpp, Ollama, LM Studio, MLX) spreads over the devices the
    worker gives it: its parallelism must then be the recipe's device count."""
    launcher = list(ENGINE_LAUNCHERS[engine])
    options = ENGINE_FLAG_OPTIONS.get(engine, {})
    args: list[str] = []
    flags = dict(engine_flags)
    for key, value in (serving or {}).items():
        flag = _FLAG_OF_SERVING.get(key)
        if value is None or (flag is not None and flags.get(flag) is not None):
            continue
        if flag is not None:
            flags[flag] = value
            continue
        name = SERVING_OPTIONS.get(engine, {}).get(key)
        if name is None or key == "tensor_parallel":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise RecipeError(f"expected a positive number, got {value!r}", source=source, field=f"serving.{key}")
        args += [name, str(value)]
    for key, value in flags.items():
        if value is None or value is False:
            continue
        if key in ("specDecoding", "mtpEnabled"):
            raise RecipeError(
                f"{key} is on, but the recipe does not say which draft: the command cannot be rebuilt",
                source=source,
                field=f"{field_name}.{key}",
            )
        if key == "tensorParallel" and value == 1:
            continue
        if (engine, key) in _INHERENT_FLAGS and _INHERENT_FLAGS[engine, key](value):
            continue
        names = options.get(key)
        if names is None:
            if key == "tensorParallel" and value == hardware_count:
                continue  # the engine spreads over the devices it is given
            if key in _FLAGS_WITHOUT_OPTION:
                raise RecipeError(
                    f"{key}={value!r}, but {engine} has no such option", source=source, field=f"{field_name}.{key}"
                )
            raise RecipeError(
                f"{key}={value!r} has no {engine} option the farm knows", source=source, field=f"{field_name}.{key}"
            )
        if isinstance(value, bool):
            rendered = "on"
        elif isinstance(value, int | str) and str(value).strip():
            rendered = str(value)
        else:
            raise RecipeError(f"expected a number or a name, got {value!r}", source=source, field=f"{field_name}.{key}")
        for name in names:
            args += [name, rendered]
    if engine in POSITIONAL_MODEL_ENGINES:
        if model is None:
            raise RecipeError(
                f"{engine} needs a model in its command, and none is known", source=source, field=field_name
            )
        return (*launcher, model, *args)
    model_flags = MODEL_FLAGS.get(engine)
    model_args = [_SYNTH_MODEL_FLAG.get(engine, model_flags[0]), model] if model_flags and model is not None else []
    return (*launcher, *model_args, *args)


_SYNTH_MODEL_FLAG = {name: kind.repository_options[0] for name, kind in ENGINES.items() if kind.repository_options}
"""The model flag a built command uses where it differs from MODEL_FLAGS' first (instance models are
repositories, `REPO:QUANT` for llama.cpp)."""

_REVISION_OPTION = {name: kind.revision_option for name, kind in ENGINES.items() if kind.revision_option}
"""Engines that load a repository at a pinned commit, and the option that pins it."""

_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")
_PLACEHOLDER = re.compile(r"^(?:<[^<>\s]+>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)$")
"""A model written as a template's placeholder (`<MODEL.gguf>`, `<path-to-gguf>`, `$MODEL`, `${MODEL_PATH}`): the
document means its own model, which its registry instance names."""
_HF_CACHE = re.compile(
    r"(?:^|/)models--(?P<owner>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<revision>[0-9a-f]{40})(?:/(?P<file>.+))?$"
)
"""A path into a Hugging Face cache (`.../hub/models--Org--Name/snapshots/<commit>/<file>`): it names the
repository, the revision and the file as surely as `--hf-repo` would."""


_REPOSITORY_LAYOUT = re.compile(
    r"^(?:\./)?(?P<repository>[A-Za-z0-9][\w.-]*/[\w.-]*GGUF[\w.-]*)/(?P<file>[\w.-]+\.gguf)$", re.IGNORECASE
)
"""A relative model path of exactly three parts, `ORG/NAME-GGUF/FILE.gguf`: a GGUF repository downloaded into a
folder of its own name, and the file in it."""
_REPOSITORY_FILE_OPTIONS = {name: kind.repository_options for name, kind in ENGINES.items() if kind.repository_options}
"""Engines that load one file of a repository, and their options for the repository and the file."""


def draft_model(draft_launch: Mapping[str, object], engine: str) -> str | None:
    """The model the registry's synthesized draft launch names (`--model org/Model`, `-hf org/Model-GGUF:Q4_K_M`):
    the registry writes it from the recipe's model instance, so it is that instance's repository."""
    arguments = draft_launch.get("arguments")
    if not draft_launch.get("synthesized") or not isinstance(arguments, list):
        return None
    tokens = [token for token in arguments if isinstance(token, str)]
    values, _ = _pop_all(tokens, MODEL_FLAGS.get(engine, ()))
    return values[0] if len(set(values)) == 1 else None


def is_template_blank(word: str) -> bool:
    """Whether a word is a template's blank (`<MODEL.gguf>`, `$MODEL`, `${MODEL}`), not a value."""
    return _PLACEHOLDER.match(word) is not None


def resolve_model(
    engine: str,
    argv: Sequence[str],
    instance: str | None,
    source: str,
    field_name: str,
    *,
    hint: str | None = None,
) -> tuple[list[str], str | None]:
    """The argv with its model named the way any host can load it, and a note of what changed (None: nothing).

    - A path into a Hugging Face cache names a repository: it becomes that repository (and, for llama.cpp, the
      file in it: `--hf-repo R --hf-file F`).
    - Another absolute path is where the submitter's machine kept the model, which no worker has, and a
      placeholder (`<MODEL.gguf>`, `$MODEL`) is a template's blank for it: when the recipe names its registry
      instance, the model becomes the instance's (farm.recipes.instances.model_for).
    - A llama.cpp command without a model (a llama-bench page that hid the path) gets the instance's model.
    Anything else is left as it is, for the policy to judge."""
    args = list(argv)
    model = model_in_argv(engine, args)
    launcher = ENGINE_LAUNCHERS[engine]
    flags = MODEL_FLAGS.get(engine, ())
    if model is None:
        if engine not in _REPOSITORY_FILE_OPTIONS or instance is None:
            return args, None
        replacement = _instance_model(engine, instance, source, hint)
        if replacement is None:
            return args, f"the model is registry instance {instance!r}; the host maps it to its own file"
        return [
            *args,
            _REPOSITORY_FILE_OPTIONS[engine][0],
            replacement,
        ], f"the model is registry instance {instance!r}: {replacement}"
    placeholder = _PLACEHOLDER.match(model) is not None
    laid_out = _REPOSITORY_LAYOUT.match(model) if engine in _REPOSITORY_FILE_OPTIONS else None
    if laid_out is not None:
        # Rule "a repository's download laid out as a path": `hf download ORG/REPO --local-dir ORG/REPO` leaves
        # `ORG/REPO/FILE.gguf`, and that relative path names the repository and its file as surely as -hf does.
        repository, file = laid_out["repository"], laid_out["file"]
        repository_option, file_option = _REPOSITORY_FILE_OPTIONS[engine]
        note = (
            f"the relative path {model!r} is repository {repository}'s file {file!r} as a download lays it out: "
            f"{repository_option} {repository} {file_option} {file}"
        )
        return _with_model(engine, args, launcher, flags, [repository_option, repository, file_option, file]), note
    if not placeholder and not model.startswith(("/", "~", "$HOME/", "${HOME}/")) and not _WINDOWS_PATH.match(model):
        return args, None
    cached = None if placeholder else _HF_CACHE.search(model)
    if cached is not None:
        repository = f"{cached['owner']}/{cached['name']}"
        revision = cached["revision"]
        note = f"the local path {model!r} is a Hugging Face cache of {repository} at {revision}"
        if engine in _REPOSITORY_FILE_OPTIONS and cached["file"]:
            # llama-server's -hf downloads the repository's current file: the snapshot's commit is in the note.
            repository_option, file_option = _REPOSITORY_FILE_OPTIONS[engine]
            new = [repository_option, repository, file_option, cached["file"]]
            return _with_model(engine, args, launcher, flags, new), note
        if cached["file"] or engine not in _REVISION_OPTION:
            return args, None  # one file of a repository, or no way to pin it: the path stays, for the policy
        pinned = [*_with_model(engine, args, launcher, flags, _model_tokens(engine, repository))]
        if _REVISION_OPTION[engine] not in pinned:
            pinned += [_REVISION_OPTION[engine], revision]
        return pinned, note
    if instance is None:
        return args, None
    try:
        replacement = instances.model_for(engine, instance, hint)
    except instances.CannotLoad:
        return args, None  # the path stays, for the policy to judge
    if placeholder:
        note = f"the placeholder {model!r} stands for the recipe's model, registry instance {instance!r}"
    else:
        note = f"the submitter's local path {model!r} stands for registry instance {instance!r}"
    if replacement is None:
        return _with_model(engine, args, launcher, flags, []), f"{note}; the host maps it to its own file"
    return _with_model(engine, args, launcher, flags, _model_tokens(engine, replacement)), f"{note}: {replacement}"


_DRAFT_FILE_FLAGS = {name: kind.draft_model_flags for name, kind in ENGINES.items() if kind.draft_model_flags}
"""Engines whose draft model is a file, and their spellings of it (llama-server's `-md`)."""


def resolve_draft(engine: str, argv: Sequence[str]) -> tuple[list[str], str | None]:
    """llama.cpp's draft model given as a file on the submitter's machine (`-md /home/me/models/d.gguf`,
    `-md models/d.gguf`): the file's name, which a worker maps to its own file (profile draft_paths) as it maps the
    main model, and a note. A file inside a Hugging Face cache or a bare name is left as it is. The file's name is
    all the recipe says of the draft: two drafts of one name are one draft to a host."""
    args = list(argv)
    if engine not in _DRAFT_FILE_FLAGS:
        return args, None
    spellings = _DRAFT_FILE_FLAGS[engine]
    notes: list[str] = []
    for index, token in enumerate(args):
        name, equals, inline = token.partition("=")
        if name not in spellings or (not equals and index + 1 >= len(args)):
            continue
        value = inline if equals else args[index + 1]
        base = re.split(r"[\\/]", value)[-1]
        if base == value or not base or base in (".", "..") or _HF_CACHE.search(value):
            continue
        if equals:
            args[index] = f"{name}={base}"
        else:
            args[index + 1] = base
        notes.append(
            f"the draft model {value!r} is a file on the submitter's machine: the host maps its name {base!r} to its "
            "own file (profile draft_paths)"
        )
    return args, "; ".join(notes) or None


def _instance_model(engine: str, instance: str, source: str, hint: str | None) -> str | None:
    try:
        return instances.model_for(engine, instance, hint)
    except instances.CannotLoad as exc:
        raise RecipeError(str(exc), source=source, field="model_instance_id") from exc


def _model_tokens(engine: str, model: str) -> list[str]:
    if engine in POSITIONAL_MODEL_ENGINES:
        return [model]
    return [_SYNTH_MODEL_FLAG.get(engine, MODEL_FLAGS[engine][0]), model]


def with_model(engine: str, args: list[str], new: list[str]) -> list[str]:
    """The engine's argv with its model replaced by `new` (an empty list: no model in the command)."""
    return _with_model(engine, args, ENGINE_LAUNCHERS[engine], MODEL_FLAGS.get(engine, ()), new)


def _with_model(
    engine: str, args: list[str], launcher: Sequence[str], flags: Sequence[str], new: list[str]
) -> list[str]:
    """The argv with its model (positional or flagged) replaced by `new`, where the first one stood."""
    head, rest = args[: len(launcher)], args[len(launcher) :]
    if engine in POSITIONAL_MODEL_ENGINES:
        return [*head, *new, *rest[1:]]
    out: list[str] = []
    placed = False
    index = 0
    while index < len(rest):
        token = rest[index]
        name, equals, _ = token.partition("=")
        if name in flags and (equals or index + 1 < len(rest)):
            if not placed:
                out += new
                placed = True
            index += 1 if equals else 2
            continue
        out.append(token)
        index += 1
    return [*head, *out]
