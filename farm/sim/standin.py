"""The simulator standing in for an engine's own command line: `python -m farm.sim.standin ENGINE ARGS...`.

A worker profile whose executable is this (`farm demo --engine ollama`, the worker tests) launches the engine's
adapter exactly as on a real host; this program reads the engine's arguments as the engine would, then becomes
the farm's simulator speaking that engine's API (farm.sim.dialects) where the engine would listen, serving the
model under the name the engine would. With FARM_FAKE_ARGV_OUT set, each call appends its argv (JSON, one line)
and any file it was handed, so a test can check that the engine receives exactly the command the judge rendered.

    ollama serve                      listens on OLLAMA_HOST
    ollama create NAME -f Modelfile   POSTs /api/create to OLLAMA_HOST (the model served as NAME)
    mlx_lm.server --model M ... --host H --port P
    lms server start --port P --bind H    starts the simulator detached (as LM Studio's daemon serves), then exits
    lms load MODEL ... --identifier ID    POSTs /sim/lms/load (the model served as ID)
    lms unload --all, lms server stop     the latter stops the detached simulator
    lms version                           prints the stand-in's version
    ENGINE --version                      prints FARM_STANDIN_VERSION as the engine would (exit 1 when unset),
                                          unrecorded: the worker asks it at start to choose the spec

`lms` keeps where its server listens in `.lms-standin.json` in its working directory (the run's own directory,
where the worker runs every `lms` command), as LM Studio's daemon remembers its server.
    python main.py --config FILE      TabbyAPI: listens on the config's network.host/port, serves model.model_name
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import urllib.request
from pathlib import Path

STARTUP_DELAY_S = "0.2"
"""The stand-in's load time: short, but not instant, so the worker's readiness wait is exercised."""


def _record(argv: list[str], files: dict[str, str]) -> None:
    out = os.environ.get("FARM_FAKE_ARGV_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"argv": argv, "files": files}) + "\n")


def _option(args: list[str], name: str) -> str:
    if name not in args or args.index(name) + 1 >= len(args):
        raise SystemExit(f"standin: {name} is missing from {args}")
    return args[args.index(name) + 1]


def _become_sim(dialect: str, model: str, host: str, port: str) -> None:
    argv = [sys.executable, "-m", "farm", "sim", "serve", "--profile", "test", "--dialect", dialect]
    argv += ["--model", model, "--host", host, "--port", port, "--fault-startup-delay", STARTUP_DELAY_S]
    os.execv(sys.executable, argv)  # noqa: S606 - becomes the simulator, as the engine's launcher becomes its server


def _ollama(args: list[str]) -> None:
    host, _, port = os.environ.get("OLLAMA_HOST", "127.0.0.1:11434").rpartition(":")
    if args[:1] == ["serve"]:
        _record(["ollama", *args], {})
        _become_sim("ollama", "(none created yet)", host, port)
    if args[:1] == ["create"] and len(args) >= 2:
        modelfile = Path(_option(args, "-f"))
        text = modelfile.read_text(encoding="utf-8")
        _record(["ollama", *args], {str(modelfile): text})
        body = json.dumps({"model": args[1], "modelfile": text}).encode()
        request = urllib.request.Request(
            f"http://{host}:{port}/api/create", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - same
            print(resp.read().decode())
        return
    raise SystemExit(f"standin: ollama {' '.join(args)} is not something the worker runs")


def _mlx(args: list[str]) -> None:
    _record(["mlx_lm.server", *args], {})
    _become_sim("mlx", _option(args, "--model"), _option(args, "--host"), _option(args, "--port"))


def _tabbyapi(args: list[str]) -> None:
    path = Path(_option(args, "--config"))
    text = path.read_text(encoding="utf-8")
    _record(["main.py", *args], {str(path): text})
    config = json.loads(text)
    network, model = config.get("network", {}), config.get("model", {})
    _become_sim("tabbyapi", str(model["model_name"]), str(network["host"]), str(network["port"]))


LMS_STATE = ".lms-standin.json"
LMS_READY_TIMEOUT_S = 20.0


def _lms_post(path: str, body: dict[str, object]) -> None:
    state = json.loads(Path(LMS_STATE).read_text(encoding="utf-8"))
    request = urllib.request.Request(
        f"http://{state['host']}:{state['port']}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - the stand-in's loopback server
        print(resp.read().decode())


def _lmstudio(args: list[str]) -> None:
    import signal
    import subprocess
    import time

    _record(["lms", *args], {})
    if args[:2] == ["server", "start"]:
        host, port = _option(args, "--bind"), _option(args, "--port")
        argv = [sys.executable, "-m", "farm", "sim", "serve", "--profile", "test", "--dialect", "lmstudio"]
        argv += ["--model", "(none loaded yet)", "--host", host, "--port", port]
        server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
        Path(LMS_STATE).write_text(json.dumps({"host": host, "port": port, "pid": server.pid}), encoding="utf-8")
        deadline = time.monotonic() + LMS_READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{host}:{port}/v1/models", timeout=1):
                    print(f"Success! Server is now running on port {port}")
                    return
            except OSError:
                time.sleep(0.1)
        raise SystemExit(f"standin: the server did not answer on port {port}")
    if args[:1] == ["load"] and len(args) >= 2:
        _lms_post("/sim/lms/load", {"model": args[1], "identifier": _option(args, "--identifier")})
        return
    if args[:2] == ["unload", "--all"]:
        return
    if args[:2] == ["server", "stop"]:
        state = json.loads(Path(LMS_STATE).read_text(encoding="utf-8"))
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(state["pid"]), signal.SIGTERM)
        print("Stopped the server")
        return
    if args[:1] == ["version"]:
        print(VERSION_LINES["lmstudio"].format(os.environ.get("FARM_STANDIN_VERSION", "0.3.0-standin")))
        return
    raise SystemExit(f"standin: lms {' '.join(args)} is not something the worker runs")


STAND_INS = {"ollama": _ollama, "lmstudio": _lmstudio, "mlx": _mlx, "tabbyapi": _tabbyapi}
"""The engines the simulator stands in for, by the table's name."""


VERSION_LINES = {
    "ollama": "ollama version is {}",
    "mlx": "mlx_lm {}",
    "tabbyapi": "TabbyAPI {}",
    "lmstudio": "lms - LM Studio CLI - {}",
}
"""How each engine's version command answers, with FARM_STANDIN_VERSION in it."""


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in STAND_INS:
        raise SystemExit(f"usage: python -m farm.sim.standin {{{','.join(STAND_INS)}}} ARGS...")
    if argv[1:] == ["--version"]:
        version = os.environ.get("FARM_STANDIN_VERSION")
        if not version:
            raise SystemExit(f"standin: {argv[0]} --version: FARM_STANDIN_VERSION is not set")
        print(VERSION_LINES[argv[0]].format(version))
        return
    STAND_INS[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
