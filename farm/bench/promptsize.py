"""Prompts of an exact token count, sized through the server's own tokenizer.

Two ways to count: the engine's tokenizer endpoint (`POST /tokenize`: vLLM and SGLang answer `count`,
llama-server `tokens`), or, on a server without one (most OpenAI-compatible servers, Ollama, LM Studio, hosted
endpoints), `usage.prompt_tokens` of a one-token completion of the prompt (`UsageCounter`). `detect_counter`
picks the first the server has; what was used is said in each figure's params and the provenance
(`prompt_sized_by`: SIZED_BY_TOKENIZE or SIZED_BY_USAGE).

A prompt is a head (a unique prefix, so no prefix cache is hit, then the task) followed by a filler cut to
some number of characters. The token count grows with the cut, so the cut is searched: interpolation on the
counts seen so far, alternating with bisection so it always converges, in a handful of round trips for any
length. When one more character jumps past the target (a tokenizer merging characters), a few short tails
are tried; a count that still cannot be hit raises MeasurementError rather than measure the wrong length.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import aiohttp

from farm.errors import MeasurementError

MAX_ROUND_TRIPS = 32
"""Round trips to /tokenize before giving up; bisection alone needs about 20 for a 500k-character prompt."""

TAILS = (" a", ".", " the", ",", "\n", " 1", "!")
"""Short endings tried when no cut of the filler gives the exact count."""

FIRST_GUESS_CHARS_PER_TOKEN = 4.0
"""English text and code run 3 to 5 characters per token in common tokenizers."""

CODE_FILLER = (
    "class Node:\n"
    "    # A node keeps its keys sorted and, unless it is a leaf, one more child than keys.\n"
    "    def __init__(self, leaf=True):\n"
    "        self.keys = []\n"
    "        self.children = []\n"
    "        self.leaf = leaf\n\n"
    "def split_child(parent, index, order):\n"
    "    child = parent.children[index]\n"
    "    middle = order - 1\n"
    "    sibling = Node(leaf=child.leaf)\n"
    "    sibling.keys = child.keys[middle + 1:]\n"
    "    if not child.leaf:\n"
    "        sibling.children = child.children[middle + 1:]\n"
    "        child.children = child.children[:middle + 1]\n"
    "    parent.keys.insert(index, child.keys[middle])\n"
    "    parent.children.insert(index + 1, sibling)\n"
    "    child.keys = child.keys[:middle]\n\n"
)
PROSE_FILLER = (
    "The keeper climbed the spiral stair at dusk, trimmed the wick and wound the clockwork that turned the "
    "lens. Through the night he logged the wind, the state of the sea and every ship that passed, and at "
    "dawn he put out the light, polished the brass and slept for a few hours before the chores of the day: "
    "painting, hauling coal and oil up from the landing, mending the boat, and teaching the children their "
    "letters at the kitchen table while the gulls wheeled over the rocks below.\n\n"
)
MATH_FILLER = (
    "Let n be a positive integer and suppose that every prime factor of n is congruent to 1 modulo 4. "
    "Then the product of any two such factors is again congruent to 1 modulo 4, since (4a + 1)(4b + 1) = "
    "16ab + 4a + 4b + 1 = 4(4ab + a + b) + 1. By induction on the number of factors, n itself is congruent "
    "to 1 modulo 4. Hence a number congruent to 3 modulo 4 has at least one prime factor of that form.\n\n"
)
FILLERS: dict[str, str] = {"code": CODE_FILLER, "prose": PROSE_FILLER, "math": MATH_FILLER}
"""Filler text per workload; none holds another workload's marker (farm.bench.prompts.WORKLOAD_MARKERS)."""


class TokenCounter(Protocol):
    """How many tokens the server counts in a prompt (the seam to /tokenize, faked in unit tests)."""

    async def count_tokens(self, text: str) -> int: ...


SIZED_BY_TOKENIZE = "/tokenize"
"""`prompt_sized_by` of prompts counted by the engine's tokenizer endpoint."""
SIZED_BY_USAGE = "usage.prompt_tokens"
"""`prompt_sized_by` of prompts counted from the usage of one-token completions (no tokenizer endpoint)."""
NO_TOKENIZE_STATUSES = frozenset({404, 405, 501})
"""What a server without a tokenizer endpoint answers at /tokenize."""


class NoTokenizeEndpoint(MeasurementError):
    """The server has no /tokenize (it answered 404, 405 or 501): count from usage instead."""


class TokenizeEndpoint:
    """vLLM's `POST /tokenize`: a raw prompt for the completions API, or one user message for chat.

    For chat the count is the templated one (`messages`, `chat_template_kwargs`), which is what the chat
    request's `usage.prompt_tokens` will say.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        model: str,
        *,
        api: Literal["chat", "completions"] = "completions",
        thinking: bool = False,
        timeout_s: float = 60.0,
    ) -> None:
        self._session = session
        self._url = base_url.rstrip("/") + "/tokenize"
        self._model = model
        self._api = api
        self._thinking = thinking
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def count_tokens(self, text: str) -> int:
        body: dict[str, Any] = {"model": self._model}
        if self._api == "chat":
            body["messages"] = [{"role": "user", "content": text}]
            body["add_generation_prompt"] = True
            body["chat_template_kwargs"] = {"enable_thinking": self._thinking}
        else:
            body["prompt"] = text
            body["content"] = text  # llama-server's /tokenize reads `content` and answers `tokens` (no `count`)
        try:
            async with self._session.post(self._url, json=body, timeout=self._timeout) as response:
                if response.status != 200:
                    detail = (await response.text())[:300]
                    kind = NoTokenizeEndpoint if response.status in NO_TOKENIZE_STATUSES else MeasurementError
                    raise kind(f"/tokenize answered HTTP {response.status}: {detail}")
                answer = await response.json()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise MeasurementError(f"/tokenize failed: {type(error).__name__}: {error}") from error
        count = answer.get("count") if isinstance(answer, dict) else None
        if count is None and isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
            count = len(answer["tokens"])
        if not isinstance(count, int):
            raise MeasurementError(f"/tokenize answered without a count: {str(answer)[:300]}")
        return count


class UsageCounter:
    """Counts a prompt as the server's `usage.prompt_tokens` of a one-token, non-streaming completion of it.

    Every server that speaks the OpenAI API reports usage, so this works where no tokenizer endpoint exists.
    Each count costs the server a prefill of the prompt (untimed), and the engine then holds that prompt in its
    prefix cache: a measured prompt must not begin as a counted one did (`farm.bench.methods` sizes with one
    unique prefix and sends with another). Counts are cached per prompt text in `cache` (shared by the sweep).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        model: str,
        *,
        api: Literal["chat", "completions"] = "completions",
        thinking: bool = False,
        timeout_s: float = 60.0,
        cache: dict[tuple[str, str], int] | None = None,
    ) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._model = model
        self._api = api
        self._thinking = thinking
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._cache = cache if cache is not None else {}

    def body(self, text: str) -> dict[str, Any]:
        """The one-token request, shaped as the measured requests are (so the count is theirs)."""
        body: dict[str, Any] = {"model": self._model, "max_tokens": 1, "temperature": 0.0, "stream": False}
        if self._api == "chat":
            body["messages"] = [{"role": "user", "content": text}]
            body["chat_template_kwargs"] = {"enable_thinking": self._thinking}
        else:
            body["prompt"] = text
        return body

    async def count_tokens(self, text: str) -> int:
        key = (self._api, text)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        path = "/v1/chat/completions" if self._api == "chat" else "/v1/completions"
        try:
            async with self._session.post(self._base + path, json=self.body(text), timeout=self._timeout) as response:
                if response.status != 200:
                    detail = (await response.text())[:300]
                    raise MeasurementError(f"sizing by usage: {path} answered HTTP {response.status}: {detail}")
                answer = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise MeasurementError(f"sizing by usage: {path} failed: {type(error).__name__}: {error}") from error
        usage = answer.get("usage") if isinstance(answer, dict) else None
        count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            raise MeasurementError(f"sizing by usage: {path} answered without usage.prompt_tokens: {str(answer)[:300]}")
        self._cache[key] = count
        return count


async def detect_counter(counter: TokenCounter) -> bool:
    """Whether the server's tokenizer endpoint answers (a short probe through `counter`); False when it has none.

    Any other failure (the server down, a malformed answer) is raised: it is not the absence of an endpoint.
    """
    try:
        await counter.count_tokens("Hello.")
    except NoTokenizeEndpoint:
        return False
    return True


@dataclass(frozen=True)
class SizedPrompt:
    """A prompt the server counts as exactly `tokens` tokens."""

    text: str
    tokens: int
    round_trips: int
    filler_chars: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


UNIQUE_PREFIX_DIGITS = 10
"""Enough that two requests of one sweep never share a prefix; few enough to stay a handful of tokens (a hex
UUID is 20 to 40 tokens in small tokenizers and would not leave room for a short prompt)."""


def unique_prefix() -> str:
    """A prefix no earlier request began with, so the server's prefix cache cannot serve any of the prompt."""
    return f"Request {uuid.uuid4().int % 10**UNIQUE_PREFIX_DIGITS:0{UNIQUE_PREFIX_DIGITS}d}.\n"


def repeated(filler: str, chars: int) -> str:
    """The filler repeated and cut to exactly `chars` characters."""
    if chars <= 0:
        return ""
    copies = chars // len(filler) + 1
    return (filler * copies)[:chars]


async def sized_prompt(
    counter: TokenCounter,
    target_tokens: int,
    *,
    head: str,
    filler: str,
    hint_chars: int | None = None,
    max_round_trips: int = MAX_ROUND_TRIPS,
) -> SizedPrompt:
    """`head` + the filler cut so that the server counts exactly `target_tokens` tokens.

    `hint_chars` is a first guess at the filler length (from an earlier prompt of the same size); with a good
    one, a prompt is often sized in one round trip.
    """
    if target_tokens < 1:
        raise MeasurementError(f"cannot size a prompt of {target_tokens} tokens")
    if not filler:
        raise ValueError("the filler must not be empty")
    seen: dict[int, int] = {}

    async def count(chars: int) -> int:
        if chars not in seen:
            if len(seen) >= max_round_trips:
                raise MeasurementError(
                    f"could not size a prompt of {target_tokens} tokens in {max_round_trips} round trips "
                    f"(counts seen: {sorted(seen.values())[:8]}...)"
                )
            seen[chars] = await counter.count_tokens(head + repeated(filler, chars))
        return seen[chars]

    def done(chars: int, text: str | None = None) -> SizedPrompt:
        return SizedPrompt(
            text=text if text is not None else head + repeated(filler, chars),
            tokens=target_tokens,
            round_trips=len(seen),
            filler_chars=chars,
        )

    low, low_count = 0, -1  # low_count < 0: the head alone has not been counted
    high, high_count = -1, -1  # high < 0: no cut has counted above the target yet
    guess = hint_chars if hint_chars is not None else int(target_tokens * FIRST_GUESS_CHARS_PER_TOKEN)
    bisect = False
    while True:
        chars = max(guess, 0)
        tokens = await count(chars)
        if tokens == target_tokens:
            return done(chars)
        if tokens < target_tokens:
            low, low_count = chars, tokens
        else:
            high, high_count = chars, tokens
            if chars == 0:
                raise MeasurementError(
                    f"the prompt's head alone is {tokens} tokens, more than the {target_tokens} asked"
                )
        if high < 0:
            # Still below: extrapolate from the rate seen so far, with a margin so the next one overshoots.
            rate = tokens / chars if chars > 0 and tokens > 0 else 1 / FIRST_GUESS_CHARS_PER_TOKEN
            guess = max(chars + 1, int(chars + (target_tokens - tokens) / rate * 1.1) + 1)
            continue
        if high - low <= 1:
            if low_count < 0 and await count(0) > target_tokens:
                raise MeasurementError(
                    f"the prompt's head alone is {seen[0]} tokens, more than the {target_tokens} asked"
                )
            low_count = seen.get(low, low_count)
            if low_count == target_tokens:
                return done(low)
            break
        if bisect or low_count < 0:
            guess = (low + high) // 2 if low_count >= 0 or low > 0 else high * target_tokens // high_count
        else:
            guess = low + int((target_tokens - low_count) * (high - low) / (high_count - low_count))
        guess = min(max(guess, low + 1), high - 1)
        bisect = not bisect
    # One more character jumps past the target: try short endings after the longest cut below it.
    base = head + repeated(filler, low)
    for tail in TAILS:
        if len(seen) >= max_round_trips:
            break
        text = base + tail
        tokens = await counter.count_tokens(text)
        seen[-len(seen) - 1] = tokens
        if tokens == target_tokens:
            return done(low, text)
    raise MeasurementError(
        f"no prompt of exactly {target_tokens} tokens: {low} filler characters give {low_count}, "
        f"{high} give {high_count}, and no tail closes the gap"
    )
