"""TabbyAPI's adapter: the judged config written into the run's own directory, and `python main.py --config
FILE` (the command is the config).

The config is the recipe's `--config` document as judged (farm.engines.tabbyapi.spec.TABBYAPI_CONFIG), with the
worker's own settings in it: where TabbyAPI listens (`network.host`, `network.port`; the recipe may not set
them), no API key on that loopback port (`network.disable_auth`), and, where the host maps the model, its folder
and name (`model.model_dir`, `model.model_name`). JSON is YAML, so the file is TabbyAPI's config.yml as is.
TabbyAPI answers `/health` and the OpenAI API under the loaded model's name; it has no /version and no /metrics.
"""

from __future__ import annotations

import json
import os
from typing import Any

from farm.engines.base import LaunchRequest
from farm.engines.process import EngineProcess
from farm.errors import ArgumentPolicyError

CONFIG_FILE = "tabbyapi-config.yml"
"""The config's name in the run's directory."""


def tabbyapi_config(request: LaunchRequest) -> dict[str, Any]:
    """The config TabbyAPI is handed: the judged document plus the worker's settings."""
    option = request.command.get("--config")
    document = option.json_value if option is not None and isinstance(option.json_value, dict) else {}
    config: dict[str, Any] = json.loads(json.dumps(document))  # a deep copy of the judged document
    network = config.setdefault("network", {})
    network.update(host=request.host, port=request.port, disable_auth=True)
    model = config.setdefault("model", {})
    if request.model_path is not None:
        model["model_dir"], model["model_name"] = os.path.split(request.model_path.rstrip("/"))
    elif request.command.value("--model-name"):
        model["model_name"] = request.command.value("--model-name")
    if not model.get("model_name"):
        raise ArgumentPolicyError("the TabbyAPI config names no model (model.model_name)", field="argv")
    return config


def tabbyapi_process_argv(request: LaunchRequest, config_path: str) -> tuple[str, ...]:
    if not request.executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    return (*request.executable, "--config", config_path)


def launch(request: LaunchRequest) -> EngineProcess:
    config = tabbyapi_config(request)
    request.run_dir.mkdir(parents=True, exist_ok=True)
    path = request.run_dir / CONFIG_FILE
    path.write_text(json.dumps(config, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    argv = tabbyapi_process_argv(request, str(path))
    return EngineProcess.launched(argv, request, served_model=str(config["model"]["model_name"]))
