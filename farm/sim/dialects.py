"""The servers the simulator can play besides vLLM: each engine's own endpoints over the same simulated engine.

A dialect changes routes only (what answers where); the timing model, the tokens and the truth endpoints
(/sim/...) are the same for every dialect.

- `sglang`: no /version; /get_server_info (with the version), /get_model_info; /metrics under `sglang:*`.
- `llamacpp`: no /version; /props (`build_info`), /metrics under `llamacpp:*` (tokens only, no prefix-cache
  counters), `GET /slots` (one per `max_num_seqs`), `POST /slots/{id}?action=erase` (HTTP 501 as llama-server
  answers unless `slot_save_path`), each answer's cached prompt tokens in `timings.cache_n` and
  `usage.prompt_tokens_details`, and a request's `cache_prompt: false` honoured (nothing reused). Its slots
  share the simulator's one prefix cache, so an erase empties it all; llama-server's host-memory prompt cache
  (`--cache-ram`, which an erase leaves) is not simulated.
- `ollama`: no /health, /version or /metrics; `GET /` ("Ollama is running"), /api/version, /api/tags,
  `POST /api/create` (what `ollama create NAME -f Modelfile` sends), which makes NAME the model it serves, and
  `POST /api/generate` (not streamed), whose final message carries Ollama's own timing from the simulator's
  truth: `prompt_eval_count`/`prompt_eval_duration` (arrival to first token) and `eval_count`/`eval_duration`
  (first to last token), in nanoseconds.
- `lmstudio`: no /health, /version or /metrics; /api/v0/models; `POST /sim/lms/load` stands for `lms load`
  (it makes the identifier the model it serves).
- `tabbyapi`: no /version or /metrics; /health (`{"status": "healthy"}`), /v1/model (the loaded model).
- `mlx`: no /version or /metrics; /health (`{"status": "ok"}`), as mlx_lm.server answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from farm.sim.http import JSON, Request, Response, json_response

if TYPE_CHECKING:
    from farm.sim.engine import SimState
    from farm.sim.http import Connection
    from farm.sim.scheduler import RequestRecord

Handler = Callable[["SimState", Request, "Connection"], "Response | None"]
Generate = Callable[..., "Response | None"]
"""farm.sim.routes.generate: (state, request, conn, kind, native=...)."""

DIALECTS = ("vllm", "sglang", "llamacpp", "ollama", "lmstudio", "tabbyapi", "mlx")
"""Every server the simulator plays (the profile's `dialect`, `farm sim serve --dialect`)."""

OWNERS = {"sglang": "sglang", "ollama": "library", "lmstudio": "organization_owner", "tabbyapi": "tabbyAPI"}
"""`owned_by` of the model card in /v1/models, as each server writes it (vLLM's and MLX's: their own name)."""


def _serve_as(state: SimState, name: str) -> None:
    """Serve the simulated model under `name` from now on (Ollama's create, LM Studio's load)."""
    state.profile = state.profile.model_copy(update={"served_model_name": name})


def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def ollama_root(state: SimState, request: Request, conn: Connection) -> Response:
    return Response(200, b"Ollama is running", "text/plain; charset=utf-8")


def ollama_version(state: SimState, request: Request, conn: Connection) -> Response:
    return json_response({"version": state.profile.version})


def ollama_tags(state: SimState, request: Request, conn: Connection) -> Response:
    name = state.profile.served_model_name
    return json_response({"models": [{"name": name, "model": name, "details": {"format": "gguf"}}]})


def ollama_create(state: SimState, request: Request, conn: Connection) -> Response:
    name = _body(request).get("model") or _body(request).get("name")
    if not isinstance(name, str) or not name:
        return Response(400, b'{"error":"model name is required"}', JSON)
    _serve_as(state, name)
    return json_response({"status": "success"})


def ollama_generate_route(generate: Generate) -> Handler:
    """`POST /api/generate` as a completion of `options.num_predict` tokens, answered whole in Ollama's form."""

    def handler(state: SimState, request: Request, conn: Connection) -> Response | None:
        body = _body(request)
        given = body.get("options")
        options: dict[str, Any] = given if isinstance(given, dict) else {}
        completion = {
            "model": body.get("model", ""),
            "prompt": body.get("prompt", ""),
            "max_tokens": options.get("num_predict", 128),
            "temperature": options.get("temperature", 0.8),
            "stream": False,
            "ignore_eos": True,
        }
        inner = Request(
            request.method,
            "/v1/completions",
            request.version,
            request.headers,
            json.dumps(completion).encode(),
            request.arrival_ns,
        )
        return generate(state, inner, conn, "completion", native="ollama")

    return handler


def ollama_final_message(
    model: str, text: str, finish_reason: str, record: RequestRecord, completion_tokens: int
) -> dict[str, Any]:
    """Ollama's final message of a generation, its timing from the simulator's record of the request."""
    first = record.first_chunk_ns if record.first_chunk_ns is not None else record.admitted_ns
    last = record.last_chunk_ns if record.last_chunk_ns is not None else first
    return {
        "model": model,
        "response": text,
        "done": True,
        "done_reason": "length" if finish_reason == "length" else "stop",
        "total_duration": last - record.arrival_ns,
        "load_duration": 0,
        "prompt_eval_count": record.prompt_tokens,
        "prompt_eval_duration": first - record.arrival_ns,
        "eval_count": completion_tokens,
        "eval_duration": last - first,
    }


def lmstudio_models(state: SimState, request: Request, conn: Connection) -> Response:
    p = state.profile
    card = {"id": p.served_model_name, "object": "model", "type": "llm", "state": "loaded"}
    return json_response({"object": "list", "data": [card | {"max_context_length": p.max_model_len}]})


def lmstudio_load(state: SimState, request: Request, conn: Connection) -> Response:
    name = _body(request).get("identifier")
    if not isinstance(name, str) or not name:
        return Response(400, b'{"error":"identifier is required"}', JSON)
    _serve_as(state, name)
    return json_response({"status": "loaded", "identifier": name})


def tabby_health(state: SimState, request: Request, conn: Connection) -> Response:
    if state.engine_dead:
        return Response(503, b'{"status":"unhealthy"}', JSON)
    return json_response({"status": "healthy"})


def tabby_model(state: SimState, request: Request, conn: Connection) -> Response:
    return json_response({"id": state.profile.served_model_name, "object": "model", "owned_by": "tabbyAPI"})


def mlx_health(state: SimState, request: Request, conn: Connection) -> Response:
    if state.engine_dead:
        return Response(503)
    return json_response({"status": "ok"})


SLOT_ACTIONS_REFUSED = "This server does not support slots action. Start it with `--slot-save-path`"
"""llama-server's answer (HTTP 501) to every `POST /slots/{id}` without --slot-save-path (0.3.36's server)."""


def llama_props(state: SimState, request: Request, conn: Connection) -> Response:
    p = state.profile
    return json_response(
        {"build_info": f"b0-sim{p.version}", "total_slots": p.max_num_seqs, "model_alias": p.served_model_name}
    )


def llama_slots(state: SimState, request: Request, conn: Connection) -> Response:
    p = state.profile
    return json_response(
        [
            {"id": slot, "n_ctx": p.max_model_len, "is_processing": slot < state.running}
            for slot in range(p.max_num_seqs)
        ]
    )


def llama_slot_action(state: SimState, request: Request, conn: Connection) -> Response:
    """`POST /slots/{id}?action=...`: only erase; refused as llama-server refuses it without --slot-save-path."""
    if not state.profile.slot_save_path:
        body = {"error": {"code": 501, "message": SLOT_ACTIONS_REFUSED, "type": "not_supported_error"}}
        return json_response(body, 501)
    slot_text = request.path.rsplit("/", 1)[1]
    action = parse_qs(request.query).get("action", [""])[0]
    if not slot_text.isdigit() or int(slot_text) >= state.profile.max_num_seqs:
        return json_response(
            {"error": {"code": 400, "message": "Invalid slot ID", "type": "invalid_request_error"}}, 400
        )
    if action != "erase":
        return json_response(
            {"error": {"code": 400, "message": "Invalid action", "type": "invalid_request_error"}}, 400
        )
    erased = len(state.prefix_cache) * state.profile.prefix_block_tokens
    state.prefix_cache.clear()
    state.cache_resets += 1
    return json_response({"id_slot": int(slot_text), "n_erased": erased})


def apply_dialect(
    routes: dict[str, dict[str, Handler]],
    dialect: str,
    sglang: dict[str, dict[str, Handler]],
    generate: Generate | None = None,
) -> None:
    """Change vLLM's routes into the dialect's, in place (`sglang`: SGLang's extra routes, `generate` the
    generation handler, from farm.sim.routes)."""
    if dialect == "vllm":
        return
    routes.pop("/version", None)
    if dialect == "sglang":
        routes.update(sglang)
        return
    if dialect == "llamacpp":
        routes["/props"] = {"GET": llama_props}
        routes["/slots"] = {"GET": llama_slots}
        routes["/slots/{id}"] = {"POST": llama_slot_action}
        return
    routes.pop("/metrics", None)
    if dialect == "ollama":
        routes.pop("/health", None)
        routes["/"] = {"GET": ollama_root}
        routes["/api/version"] = {"GET": ollama_version}
        routes["/api/tags"] = {"GET": ollama_tags}
        routes["/api/create"] = {"POST": ollama_create}
        if generate is not None:
            routes["/api/generate"] = {"POST": ollama_generate_route(generate)}
    elif dialect == "lmstudio":
        routes.pop("/health", None)
        routes["/api/v0/models"] = {"GET": lmstudio_models}
        routes["/sim/lms/load"] = {"POST": lmstudio_load}
    elif dialect == "tabbyapi":
        routes["/health"] = {"GET": tabby_health}
        routes["/v1/model"] = {"GET": tabby_model}
    elif dialect == "mlx":
        routes["/health"] = {"GET": mlx_health}
