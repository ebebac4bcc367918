"""vLLM's OpenAI-compatible shapes: request bodies in, JSON and pre-encoded SSE bytes out.

Shapes follow vllm/entrypoints/openai/protocol.py. Errors are
`{"error": {"message", "type", "param", "code"}}` with the HTTP status as `code`. Completion chunks are
`text_completion` objects, chat chunks `chat.completion.chunk` objects whose first chunk carries `delta.role`;
with `stream_options.include_usage` a last chunk has `choices: []` and `usage`; the stream ends with
`data: [DONE]`.

Streamed chunks are built from bytes templates with only the text substituted (no json.dumps per chunk): the
generated words are plain ASCII and need no escaping.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from farm.errors import FarmError
from farm.sim import tokenizer
from farm.sim.profile import SimProfile

DONE = b"data: [DONE]\n\n"

# The generated text: one word per token, each a single tokenizer token with a leading space (so re-tokenizing
# the output gives completion_tokens back), JSON-safe as it is.
_SENTENCE = (
    "the model writes one word per token and the simulator keeps time for every stream so that a client can "
    "check its clock against the truth of each chunk while tokens arrive in steps of one or more words under "
    "speculative decoding with drafts accepted at the rate of the profile"
)
WORDS = tuple(_SENTENCE.split())
WORD_BYTES = tuple(f" {w}".encode("ascii") for w in WORDS)


class ApiError(FarmError):
    """A request the simulated server refuses, with vLLM's status and error type."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param
        super().__init__(f"{status} {err_type}: {message}")

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.err_type, self.param)


def error_body(status: int, message: str, err_type: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": status}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = True
    continuous_usage_stats: bool | None = False


class _CommonBody(BaseModel):
    """The sampling fields both endpoints honour; unknown fields are ignored, as vLLM ignores them."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int = 1
    temperature: float | None = Field(None, ge=0)
    seed: int | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(0, ge=0)
    cache_prompt: bool = True  # llama-server's: false reuses no cached prompt (the llamacpp dialect honours it)


class CompletionBody(_CommonBody):
    prompt: str | list[int] | list[str] | None = None
    max_tokens: int | None = 16
    add_special_tokens: bool = True


class ChatBody(_CommonBody):
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    add_generation_prompt: bool = True
    chat_template_kwargs: dict[str, Any] | None = None


class TokenizeBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = True
    chat_template_kwargs: dict[str, Any] | None = None


class DetokenizeBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    tokens: list[int]


def validation_error(exc: ValidationError) -> ApiError:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    return ApiError(400, f"{first['msg']} ({loc})" if loc else first["msg"], param=loc or None)


def parse_body(raw: bytes, model: type[BaseModel]) -> Any:
    """Parse a request body into `model`; bad JSON or a bad field is a 400 in vLLM's error shape.

    pydantic parses the JSON itself (about half the time of json.loads and then validating the dict).
    """
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(400, f"Invalid JSON in the request body: {first['msg']}") from exc
        if first["type"] == "model_type" and not first["loc"]:
            raise ApiError(400, "The request body must be a JSON object.") from exc
        raise validation_error(exc) from exc


@dataclass
class GenerationRequest:
    """A completion or chat request, normalised: prompt tokens counted, lengths and sampling decided."""

    kind: Literal["completion", "chat"]
    model: str
    prompt_tokens: list[str]
    prompt_text: str
    max_tokens: int
    ignore_eos: bool
    min_tokens: int
    temperature: float
    seed: int | None
    stream: bool
    include_usage: bool
    cache_prompt: bool = True
    """llama-server's request field: false, no cached prefix is reused (honoured by the llamacpp dialect)."""


def check_model(requested: str | None, profile: SimProfile) -> str:
    if requested is not None and requested != profile.served_model_name:
        raise ApiError(404, f"The model `{requested}` does not exist.", "NotFoundError", "model")
    return profile.served_model_name


def _common(body: _CommonBody, profile: SimProfile) -> tuple[str, bool, bool]:
    model = check_model(body.model, profile)
    if body.n != 1:
        raise ApiError(400, "The simulator serves n=1 only.", param="n")
    stream = bool(body.stream)
    if body.stream_options is not None and not stream:
        raise ApiError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
    include_usage = bool(stream and body.stream_options is not None and body.stream_options.include_usage)
    return model, stream, include_usage


def _decide_max_tokens(requested: int | None, prompt_len: int, profile: SimProfile) -> int:
    room = profile.max_model_len - prompt_len
    if requested is None:
        if room < 1:
            raise _too_long(profile, prompt_len, 1)
        return room
    if requested < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {requested}.", param="max_tokens")
    if requested > room:
        raise _too_long(profile, prompt_len, requested)
    return requested


def _too_long(profile: SimProfile, prompt_len: int, max_tokens: int) -> ApiError:
    return ApiError(
        400,
        f"This model's maximum context length is {profile.max_model_len} tokens. However, you requested "
        f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in the completion). "
        "Please reduce the length of the messages or completion.",
    )


def completion_request(body: CompletionBody, profile: SimProfile) -> GenerationRequest:
    model, stream, include_usage = _common(body, profile)
    prompt = body.prompt
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        if len(prompt) != 1:
            raise ApiError(400, "The simulator serves one prompt per request.", param="prompt")
        prompt = str(prompt[0])
    if prompt is None or prompt == []:
        raise ApiError(400, "Either prompt or prompt_embeds must be provided and non-empty.", param="prompt")
    if isinstance(prompt, str):
        tokens = tokenizer.completion_prompt_tokens(prompt, add_bos=profile.add_bos and body.add_special_tokens)
        text = prompt
    else:
        tokens = [str(t) for t in prompt]
        text = ""
    return GenerationRequest(
        kind="completion",
        model=model,
        prompt_tokens=tokens,
        prompt_text=text,
        max_tokens=_decide_max_tokens(body.max_tokens, len(tokens), profile),
        ignore_eos=body.ignore_eos,
        min_tokens=body.min_tokens,
        temperature=1.0 if body.temperature is None else body.temperature,
        seed=body.seed,
        stream=stream,
        include_usage=include_usage,
        cache_prompt=body.cache_prompt,
    )


def chat_request(body: ChatBody, profile: SimProfile) -> GenerationRequest:
    model, stream, include_usage = _common(body, profile)
    if not body.messages:
        raise ApiError(400, "messages must not be empty.", param="messages")
    try:
        tokens = tokenizer.chat_prompt_tokens(
            body.messages,
            add_generation_prompt=body.add_generation_prompt,
            chat_template_kwargs=body.chat_template_kwargs,
        )
        text = "\n".join(tokenizer.message_text(m.get("content")) for m in body.messages)
    except ValueError as exc:
        raise ApiError(400, str(exc), param="messages") from exc
    requested = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    return GenerationRequest(
        kind="chat",
        model=model,
        prompt_tokens=tokens,
        prompt_text=text,
        max_tokens=_decide_max_tokens(requested, len(tokens), profile),
        ignore_eos=body.ignore_eos,
        min_tokens=body.min_tokens,
        temperature=1.0 if body.temperature is None else body.temperature,
        seed=body.seed,
        stream=stream,
        include_usage=include_usage,
        cache_prompt=body.cache_prompt,
    )


def text_offset(req: GenerationRequest, rng: random.Random) -> int:
    """Where in the word cycle the output starts: fixed by the prompt when greedy, drawn when sampling."""
    if req.temperature == 0.0:
        return sum(len(t) for t in req.prompt_tokens[:64]) % len(WORD_BYTES)
    if req.seed is not None:
        return random.Random(req.seed).randrange(len(WORD_BYTES))
    return rng.randrange(len(WORD_BYTES))


def output_text(offset: int, start: int, end: int) -> bytes:
    """The generated text of tokens start..end-1 (bytes, JSON-safe)."""
    n = len(WORD_BYTES)
    return b"".join([WORD_BYTES[(offset + i) % n] for i in range(start, end)])


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


_COMPLETION_SUFFIX = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
_COMPLETION_FINAL_SUFFIX = {
    reason: f'","logprobs":null,"finish_reason":"{reason}","stop_reason":null}}]}}\n\n'.encode()
    for reason in ("length", "stop")
}
_CHAT_SUFFIX = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
_CHAT_FINAL_SUFFIX = {
    reason: f'"}},"logprobs":null,"finish_reason":"{reason}","stop_reason":null}}]}}\n\n'.encode()
    for reason in ("length", "stop")
}


class ChunkTemplates:
    """The bytes of every SSE event of one streamed response, with the text as the only part that varies."""

    def __init__(self, req: GenerationRequest, request_id: str, created: int, *, report_cached: bool = False) -> None:
        """`report_cached`: the usage chunk says the cached prompt tokens as llama-server does
        (`usage.prompt_tokens_details.cached_tokens` and `timings.cache_n`)."""
        self.report_cached = report_cached
        self.kind = req.kind
        self.request_id = request_id
        self.created = created
        self.model = req.model
        model_json = json.dumps(req.model)
        if req.kind == "completion":
            head = (
                f'data: {{"id":"{request_id}","object":"text_completion","created":{created},'
                f'"model":{model_json},"choices":[{{"index":0,"text":"'
            )
            self.prefix = head.encode()
            self.suffix = _COMPLETION_SUFFIX
            self.final_suffix = _COMPLETION_FINAL_SUFFIX
            self.opening = b""
        else:
            head = (
                f'data: {{"id":"{request_id}","object":"chat.completion.chunk","created":{created},'
                f'"model":{model_json},"choices":[{{"index":0,"delta":{{'
            )
            self.prefix = head.encode() + b'"content":"'
            self.suffix = _CHAT_SUFFIX
            self.final_suffix = _CHAT_FINAL_SUFFIX
            # vLLM sends the role first, in its own chunk, when the first output arrives.
            self.opening = (
                head.encode() + b'"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
            )

    def chunk(self, text: bytes) -> bytes:
        return self.prefix + text + self.suffix

    def final_chunk(self, text: bytes, finish_reason: str) -> bytes:
        return self.prefix + text + self.final_suffix[finish_reason]

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> bytes:
        obj = "text_completion" if self.kind == "completion" else "chat.completion.chunk"
        body: dict[str, Any] = {
            "id": self.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage(prompt_tokens, completion_tokens),
        }
        if self.report_cached:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
            body["timings"] = {
                "cache_n": cached_tokens,
                "prompt_n": prompt_tokens - cached_tokens,
                "predicted_n": completion_tokens,
            }
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


# Request ids only need to be unique: 128 random bits from a generator seeded once from the OS, not uuid4's
# os.urandom call (a syscall) per request in the admission path.
_ID_RNG = random.Random(int.from_bytes(os.urandom(16), "big"))


def new_request_id(kind: str) -> str:
    return f"{'cmpl' if kind == 'completion' else 'chatcmpl'}-{_ID_RNG.getrandbits(128):032x}"


def now_s() -> int:
    return int(time.time())


def full_response(
    req: GenerationRequest,
    request_id: str,
    created: int,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """The non-streaming response body."""
    if req.kind == "completion":
        choice: dict[str, Any] = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        obj = "text_completion"
    else:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "chat.completion"
    body: dict[str, Any] = {
        "id": request_id,
        "object": obj,
        "created": created,
        "model": req.model,
        "choices": [choice],
        "usage": usage(prompt_tokens, completion_tokens),
    }
    if req.kind == "chat":
        body["prompt_logprobs"] = None
    return body
