"""The one secret scrubber: what keeps secrets out of everything the farm stores or prints.

Every path that persists or prints engine output, failure messages, artifacts, environments or provenance goes
through `scrub_text` (and `scrub_argv`, `scrub_json`, `scrub_environment` built on it). It knows two kinds of
shape, checked in this order:

- the farm's own rules, for what logs and configuration carry: PEM private keys (the whole block, or to the end
  of a cut one); credentials in URLs (`scheme://user:password@host`, a password holding `@` too: everything up to
  the last `@` before the host); `Authorization: Bearer/Basic/Token ...`; `Cookie:` and `Set-Cookie:` values;
  signed-URL parameters (`X-Amz-Signature=`, `X-Amz-Credential=`, `X-Amz-Security-Token=`, `X-Goog-Signature=`,
  `sig=`, `signature=`, `token=`, `access_token=`, `api_key=`, ...); YAML `key: value` lines and `NAME=value`,
  `NAME: value`, `"name": "value"` pairs whose name is secret-named (a last word `key`, `token`, `password`,
  `secret`, `credential`, `passphrase`, `cookie`, `apikey`; or `password`/`secret`/`passphrase` anywhere, in
  snake, kebab or camel case: `api_key`, `hfToken`, `client-secret`, not `max_tokens`); flags such as
  `--hf-token VALUE` or `--api-key=VALUE`; and tokens by their shape (`hf_`, `sk-`, `ghp_`/`gho_`/`ghs_`/
  `github_pat_`, `glpat-`, `xox?-`, `AKIA`/`ASIA`);
- the patterns of a maintained library, detect-secrets (Yelp): every one of its regex plugins (AWS, Azure
  storage keys, GitHub, GitLab, Slack, Stripe, SendGrid, Twilio, Telegram, Discord, npm, PyPI, JWTs, Mailchimp,
  Square, Artifactory, IBM, Cloudant, SoftLayer, OpenAI ...) but its entropy and keyword heuristics, which flag
  every hash and digest a benchmark records.

A secret is replaced with `<redacted>`; the text around it stays. `mask_url` prints a connection URL with its
password hidden. bench/scrubber.py measures the speed on a large engine log.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from farm.domain import Artifact

REDACTED = "<redacted>"
"""What a secret is replaced with."""

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|CREDENTIAL|PRIVATE)", re.IGNORECASE)
"""An environment variable whose name says it holds a secret (used on environments, name by name)."""

_SHAPES = (
    r"hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"
    r"|glpat-[A-Za-z0-9_-]{8,}|xox[abposre]-[A-Za-z0-9-]{8,}|xapp-[A-Za-z0-9-]{8,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
)
SECRET_VALUE = re.compile(rf"^(?:{_SHAPES})$")
"""A value that is a token by its shape, whatever its name."""

_TOKEN = re.compile(rf"\b(?:{_SHAPES})\b")
_PEM = re.compile(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END (?P=kind)-----|\Z)", re.DOTALL
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^\s/]+)@")
_AUTH_HEADER = re.compile(
    r"\b(?P<kind>Bearer|Basic|Token|Digest)(?P<gap>\s+)(?P<value>[A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE
)
_COOKIE = re.compile(r"(?P<name>\b(?:Set-)?Cookie\s*:[ \t]*)(?P<value>[^\r\n]+)", re.IGNORECASE)
_SIGNED_PARAMETER = re.compile(
    r"(?P<name>[?&;](?:X-Amz-(?:Signature|Credential|Security-Token)|X-Goog-(?:Signature|Credential)"
    r"|sig|signature|token|access_token|id_token|refresh_token|api_?key|apikey|key|client_secret|password"
    r"|auth|Policy|Key-Pair-Id)=)(?P<value>[^&\s#\"'<>]+)",
    re.IGNORECASE,
)
_SECRET_STEMS = "(?i:pass|pwd|secret|token|key|cred|cookie|auth)"  # noqa: S105 (a pattern of names, not a secret)
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_YAML_PAIR = re.compile(
    rf"^(?P<lead>[ \t]*(?:-[ \t]+)?)(?P<name>{_NAME})(?P<sep>[ \t]*:[ \t]+)(?P<value>[^\r\n]*?)[ \t]*$",
    re.MULTILINE,
)
_PAIR = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>(?>[A-Za-z_][A-Za-z0-9_.\-]*))"  # atomic: one try per name, no backtracking
    r"(?P<sep>[\"']?\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]]+)"
)
_STEM = re.compile(_SECRET_STEMS)
_SECRET_FLAG = re.compile(
    r"(?P<name>--(?:[a-z0-9]+-)*(?:token|key|api-key|password|secret))(?P<sep>=|\s+)(?P<value>[^\s-][^\s]*)",
    re.IGNORECASE,
)
_SECRET_FLAG_NAME = re.compile(r"^--(?:[a-z0-9]+-)*(?:token|key|api-key|password|secret)$", re.IGNORECASE)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_LAST_WORDS = frozenset(
    {"key", "token", "password", "passwd", "pwd", "secret", "credential", "credentials", "passphrase", "cookie"}
)
_ANY_WORDS = frozenset({"password", "passwd", "secret", "passphrase", "apikey"})

LIBRARY_SKIPPED = frozenset(
    {"Base64 High Entropy String", "Hex High Entropy String", "Secret Keyword", "Public IP (ipv4)", "Private Key"}
)
"""detect-secrets plugins not used: entropy and keyword heuristics (every digest and hash a run records would
go), public IP addresses (not secrets), and its private-key check, which finds the header line only (the farm's
own rule takes the whole block)."""

_KEYWORD_HEURISTIC = r"(?:(?<=\W)|(?<=^))"
"""How detect-secrets' keyword-assignment patterns begin (Cloudant, IBM COS, IBM Cloud IAM, SoftLayer:
`cl_api_key = "..."`): name-based, like its Secret Keyword plugin, and covered by the farm's own name rule
(is_secret_name); they cost half the scrubber's time on a large log, so they are not run."""

_DELIMITERS = " \t\r\n=:\"'"


def is_secret_name(name: str) -> bool:
    """Whether a key or variable name says it holds a secret: its last word is key, token, password, ...,
    or it holds password/secret/passphrase anywhere (`api_key`, `hfToken`, `client-secret`, `DB_PASSWORD_FILE`);
    `max_tokens`, `tokenizer` and `keyboard` do not."""
    words = [word.lower() for word in _WORDS.findall(name)]
    if not words:
        return False
    if words[-1] in _LAST_WORDS or words[-1].endswith(("password", "passwd", "secret", "apikey", "token")):
        return True  # PGPASSWORD, HFTOKEN
    if any(stem in word for word in words for stem in _ANY_WORDS):
        return True
    return len(words) >= 2 and words[-2:] in (["api", "key"], ["access", "key"], ["private", "key"])


def scrub_text(text: str) -> str:
    """The text with every secret of the shapes in the module docstring replaced by `<redacted>`."""
    if not text:
        return text
    # Each rule runs only on the lines where its literal part occurs (a substring search is far cheaper than a
    # regex over a whole engine log); a multi-line PEM block is looked for in the whole text.
    if "PRIVATE KEY" in text:
        text = _PEM.sub(REDACTED, text)
    text = _on_lines(text, _URL_CREDENTIALS, lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", ("://",))
    text = _on_lines(text, _AUTH_HEADER, lambda m: f"{m['kind']}{m['gap']}{REDACTED}", _AUTH_NEEDLES)
    text = _on_lines(text, _COOKIE, lambda m: f"{m['name']}{REDACTED}", ("cookie",))
    text = _on_lines(text, _SIGNED_PARAMETER, lambda m: f"{m['name']}{REDACTED}", _SIGNED_NEEDLES)
    if ":" in text:
        text = _YAML_PAIR.sub(_redact_yaml, text)
    if "=" in text or ":" in text:
        text = _PAIR.sub(_redact_pair, text)
    if "--" in text:
        text = _SECRET_FLAG.sub(_redact_value, text)
    text = _on_lines(text, _TOKEN, REDACTED, _TOKEN_NEEDLES)
    return _library_scrub(text)


_AUTH_NEEDLES = ("bearer", "basic", "digest", "token\t", "token ")
_SIGNED_NEEDLES: tuple[str, ...] = (
    "sig=",
    "signature=",
    "token=",
    "key=",
    "x-amz-",
    "x-goog-",
    "password=",
    "auth=",
    "policy=",
)
_SIGNED_NEEDLES += ("secret=", "key-pair-id=")
_TOKEN_NEEDLES: tuple[str, ...] = ("hf_", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-")
_TOKEN_NEEDLES += ("xox", "xapp-", "akia", "asia")
_WHOLE_TEXT_LINES = 2000
"""Past this many candidate lines one pass over the whole text is cheaper than line by line."""


def _on_lines(
    text: str, pattern: re.Pattern[str], replacement: str | Callable[[re.Match[str]], str], needles: tuple[str, ...]
) -> str:
    """`pattern.sub(replacement, text)`, run only on the lines holding one of `needles` (matched without case)."""
    haystack = text.lower()
    starts: set[int] = set()
    for needle in needles:
        index = haystack.find(needle)
        while index != -1:
            starts.add(text.rfind("\n", 0, index) + 1)
            if len(starts) > _WHOLE_TEXT_LINES:
                return pattern.sub(replacement, text)
            index = haystack.find(needle, index + len(needle))
    if not starts:
        return text
    out: list[str] = []
    position = 0
    for start in sorted(starts):
        end = text.find("\n", start)
        end = len(text) if end == -1 else end
        out.append(text[position:start])
        out.append(pattern.sub(replacement, text[start:end]))
        position = end
    out.append(text[position:])
    return "".join(out)


def _redact_yaml(match: re.Match[str]) -> str:
    value = match["value"]
    if not value or value.startswith(("|", ">", "{", "[")) or REDACTED in value:
        return match[0]
    if _STEM.search(match["name"]) is None or not is_secret_name(match["name"]):
        return match[0]
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{match['lead']}{match['name']}{match['sep']}{quote}{REDACTED}{quote}"


def _redact_pair(match: re.Match[str]) -> str:
    if _STEM.search(match["name"]) is None or not is_secret_name(match["name"]):
        return match[0]
    return _redact_value(match)


def _redact_value(match: re.Match[str]) -> str:
    value = match["value"]
    if value == REDACTED or value.strip("\"'") == REDACTED:
        return match[0]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['name']}{match['sep']}{quote}{REDACTED}{quote}"


@functools.cache
def _library_patterns() -> tuple[re.Pattern[str], ...]:
    """The regexes of detect-secrets' plugins (LIBRARY_SKIPPED aside), read from the installed library."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    patterns: list[re.Pattern[str]] = []
    plugins: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    for kind in sorted(plugins):
        if kind in LIBRARY_SKIPPED:
            continue
        for pattern in getattr(plugins[kind](), "denylist", ()):
            compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
            if not compiled.pattern.startswith(_KEYWORD_HEURISTIC):
                patterns.append(compiled)
    return tuple(patterns)


def _library_scrub(text: str) -> str:
    """Each detect-secrets match replaced: its first group where the pattern marks the secret with one, else the
    match without the delimiters some patterns take in (a space, `=`, `:`, a quote)."""
    spans: list[tuple[int, int]] = []
    for pattern in _library_patterns():
        for match in pattern.finditer(text):
            if pattern.groups and match.group(1) is not None:
                start, end = match.span(1)
            else:
                start, end = match.span()
                while start < end and text[start] in _DELIMITERS:
                    start += 1
                while end > start and text[end - 1] in _DELIMITERS:
                    end -= 1
            if end > start and text[start:end] != REDACTED and REDACTED not in text[start:end]:
                spans.append((start, end))
    if not spans:
        return text
    out: list[str] = []
    position = 0
    for start, end in sorted(spans):
        if end <= position:
            continue
        out.append(text[position : max(start, position)])
        out.append(REDACTED)
        position = end
    out.append(text[position:])
    return "".join(out)


def scrub_argv(argv: Sequence[str]) -> list[str]:
    """An argument list with secrets removed: each argument scrubbed, and the value after a secret-named flag
    (`--hf-token VALUE`) redacted."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        after_secret_flag = index > 0 and _SECRET_FLAG_NAME.match(argv[index - 1]) is not None
        out.append(REDACTED if after_secret_flag and not arg.startswith("--") else scrub_text(arg))
    return out


def scrub_json(value: Any) -> Any:
    """A JSON-like value with every string scrubbed, and the value of every secret-named key redacted."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, Mapping):
        return {
            key: (REDACTED if isinstance(key, str) and is_secret_name(key) and item else scrub_json(item))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        if all(isinstance(item, str) for item in value):
            return scrub_argv(value)
        return [scrub_json(item) for item in value]
    return value


def scrub_artifact(artifact: Artifact) -> Artifact:
    """An artifact (an engine log) with its secrets removed."""
    return Artifact(name=artifact.name, content=scrub_text(artifact.content), media_type=artifact.media_type)


def mask_url(url: str) -> str:
    """A connection URL fit to print: its password (if any) replaced, e.g. for FARM_DATABASE_URL."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url)


def scrub_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with every secret's value replaced, by name or by the shape of the value."""
    return {k: (REDACTED if SECRET_NAME.search(k) or SECRET_VALUE.match(v) else scrub_text(v)) for k, v in env.items()}
