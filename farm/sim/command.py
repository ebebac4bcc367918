"""The simulator's command line: flags in, a profile and faults built, the simulator served.

`farm sim` (farm.cli.sim) and `python -m farm.sim` both run this app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from farm.errors import InputError
from farm.sim.scheduler import DEFAULT_SPIN_US

app = typer.Typer(help="The vLLM simulator.", no_args_is_help=True)


@app.command()
def serve(
    profile: Annotated[str, typer.Option(help="a shipped profile name (see `farm sim profiles`)")] = "test",
    profile_file: Annotated[Path | None, typer.Option(help="a profile TOML file (instead of --profile)")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="override a profile field: key=value (dotted keys reach tables)"),
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port, logged)")] = 8000,
    model: Annotated[str | None, typer.Option(help="served model name (overrides the profile's)")] = None,
    max_model_len: Annotated[
        int | None,
        typer.Option(help="the recipe's --max-model-len: above the profile's max_position_embeddings, exit at start"),
    ] = None,
    dialect: Annotated[
        str | None,
        typer.Option(
            help="the server to play: vllm, sglang, llamacpp, ollama, lmstudio, tabbyapi or mlx (overrides the "
            "profile's)"
        ),
    ] = None,
    fault_startup_delay: Annotated[
        float | None, typer.Option(help="seconds before listening (replaces the profile's startup_s)")
    ] = None,
    fault_crash_after: Annotated[
        float | None,
        typer.Option(help="seconds after listening before the engine dies and the process exits"),
    ] = None,
    fault_crash_linger: Annotated[
        float, typer.Option(help="seconds between engine death (/health 503) and the hard exit")
    ] = 0.0,
    fault_hang_after: Annotated[
        float | None, typer.Option(help="seconds after listening before nothing answers any more")
    ] = None,
    fault_error_rate: Annotated[float, typer.Option(help="fraction of completion requests answered HTTP 500")] = 0.0,
    fault_seed: Annotated[int, typer.Option(help="seed of the error draws")] = 0,
    spin_us: Annotated[
        int, typer.Option(help="yield instead of sleeping when the next chunk is this close (µs)")
    ] = DEFAULT_SPIN_US,
) -> None:
    """Serve vLLM's OpenAI-compatible API from the simulator (or SGLang's, with --dialect sglang)."""
    from farm.sim.faults import FaultPlan
    from farm.sim.profile import load_profile, parse_override
    from farm.sim.server import run_server

    try:
        overrides = dict(parse_override(item) for item in (set_ or []))
        if model is not None:
            overrides["served_model_name"] = model
        if dialect is not None:
            overrides["dialect"] = dialect
        loaded = load_profile(None if profile_file else profile, path=profile_file, overrides=overrides)
        faults = FaultPlan(
            startup_delay_s=fault_startup_delay,
            crash_after_s=fault_crash_after,
            crash_linger_s=fault_crash_linger,
            hang_after_s=fault_hang_after,
            error_rate=fault_error_rate,
            seed=fault_seed,
        )
    except (InputError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    limit = loaded.max_position_embeddings
    if max_model_len is not None and limit is not None and max_model_len > limit:
        # vLLM's own refusal (ModelConfig), before anything listens: the same recipe fails so on every host.
        typer.echo(
            f"ValueError: User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
            f"(max_position_embeddings={limit} in model's config.json).",
            err=True,
        )
        raise typer.Exit(1)
    run_server(loaded, faults, host=host, port=port, spin_us=spin_us)


@app.command()
def profiles() -> None:
    """List the shipped simulator profiles."""
    from farm.sim.profile import load_profile, profile_names

    for name in profile_names():
        typer.echo(f"{name}\t{load_profile(name).served_model_name}")
