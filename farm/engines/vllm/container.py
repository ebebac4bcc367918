"""vLLM in the recipe's digest-pinned container as an Engine: the `docker run` farm.engines.container builds, in
the foreground as the supervised process (its own process group, its output the engine log, its exit ending the
readiness wait). Stopping asks Docker first (`docker stop -t GRACE`, then `docker rm -f`), because signalling the
client alone may leave the container running; a stale container of the same name (a worker that died) is removed
before the start."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from farm.engines.container import DOCKER_CLIENT_ENV, DOCKER_COMMAND_TIMEOUT_S, docker_run_argv
from farm.engines.policy import DEFAULT_POLICY, EnginePolicy
from farm.engines.process import GPU_FREE_DEADLINE_S
from farm.engines.vllm import ENGINE
from farm.engines.vllm.process import VllmEngineProcess
from farm.hardware.probe import HardwareProbe
from farm.logs import get_logger
from farm.private_files import open_private
from farm.recipes.model import ContainerLaunch

log = get_logger(__name__)


class ContainerEngine(VllmEngineProcess):
    """The recipe's container as an Engine: foreground `docker run` supervised like a process."""

    def __init__(
        self,
        container: ContainerLaunch,
        *,
        name: str,
        gpus: Sequence[int],
        host_port: int,
        log_path: Path,
        served_model: str,
        model_cache: str | None = None,
        extra_env: Mapping[str, str] = {},
        base_env: Mapping[str, str] | None = None,
        policy: EnginePolicy = DEFAULT_POLICY,
        docker: str = "docker",
        stop_grace_s: float = 30.0,
        probe: HardwareProbe | None = None,
        gpu_free_deadline_s: float = GPU_FREE_DEADLINE_S,
        device_count: int | None = None,
        cache_read_only: bool = True,
    ) -> None:
        argv = docker_run_argv(
            container,
            gpus=gpus,
            host_port=host_port,
            name=name,
            model_cache=model_cache,
            extra_env=extra_env,
            policy=policy,
            docker=docker,
            engine=ENGINE.name,
            device_count=device_count,
            cache_read_only=cache_read_only,
        )
        source = os.environ if base_env is None else base_env
        env = {k: v for k, v in source.items() if k in DOCKER_CLIENT_ENV}
        env.update(extra_env)  # the host's own variables, passed by name; never the recipe's
        super().__init__(
            argv,
            env=env,
            log_path=log_path,
            base_url=f"http://127.0.0.1:{host_port}",
            served_model=served_model,
            stop_grace_s=stop_grace_s,
            probe=probe,
            gpu_free_deadline_s=gpu_free_deadline_s,
        )
        self._name = name
        self._docker = docker
        self._image_digest = container.digest

    @property
    def container_name(self) -> str:
        return self._name

    @property
    def image_digest(self) -> str | None:
        return self._image_digest

    def start(self) -> None:
        """Remove a stale container of the same name (a worker that died mid-run), then `docker run`."""
        self._docker_command("rm", "-f", self._name)
        super().start()

    def _before_group_stop(self) -> None:
        grace = max(0, round(self._stop_grace_s))
        self._docker_command("stop", "-t", str(grace), self._name, timeout_s=grace + DOCKER_COMMAND_TIMEOUT_S)
        self._docker_command("rm", "-f", self._name)

    def _docker_command(self, *args: str, timeout_s: float = DOCKER_COMMAND_TIMEOUT_S) -> int | None:
        """Run one docker command, appending its output to the engine log; its failure is logged, not raised
        (a container that is already gone is the usual case)."""
        argv = (self._docker, *args)
        try:
            with open_private(self.log_path) as log_file:
                done = subprocess.run(
                    argv,
                    env=self.environment,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    check=False,
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("docker.command_failed", argv=list(argv), error=str(exc))
            return None
        if done.returncode != 0:
            log.info("docker.command_status", argv=list(argv), status=done.returncode)
        return done.returncode


launch_container = ContainerEngine
"""The table's container entry point (`EngineKind.container_adapter`)."""
