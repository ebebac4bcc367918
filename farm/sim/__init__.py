"""The vLLM simulator: vLLM's OpenAI-compatible HTTP API over a calibrated timing model, with fault injection.

Modules, by job:
    profile      the profile model (pydantic, TOML files in `profiles/`) and how a profile is loaded
    timing       the truth functions of the timing model (no I/O)
    tokenizer    the simulator's deterministic tokenizer and chat template
    prefix_cache the LRU of prompt-prefix block hashes
    protocol     request parsing and pre-encoded response bytes in vLLM's shapes
    metrics      counters, histograms and the Prometheus text of `/metrics`; schedule lateness
    scheduler    the single task that writes every stream's chunks at their due times
    faults       the fault plan (slow start, crash, hang, errors) and arming it on a running engine
    http         a small HTTP/1.1 server on asyncio.Protocol (requests stamped on arrival, no task each)
    engine       the simulated engine's state and its `max_num_seqs` slots (admission, start, finish)
    routes       the HTTP endpoints over the engine, and `build_app`
    server       the process: start-up delay, listening, faults armed, `serve` and `run_server`
    command      the command line (`farm sim`, `python -m farm.sim`)
    launch       the one way to start a simulator process and wait until it serves (bench/, tests, worker)
"""
