"""GPU host check: the NVML probe, the peak-memory sampler against a known allocation, the GPUs-free check
after an engine process group is stopped, and the card's energy counter against its integrated power samples.
Prints PASS/FAIL per check and a verdict; exit status 0 on PASS.

For a GPU host with PyTorch (CUDA) and nvidia-ml-py but no vLLM and not even the farm's dependencies:

    PYTHONPATH=. python bench/gpu_check.py [--gib 8] [--card 0] [--load-s 8]

Only the standard library, torch, pynvml and the farm modules that need nothing else (farm.hardware.nvml,
farm.worker.memory, farm.worker.energy, farm.bench.energy, farm.engines.process and farm.engines.vllm.adapter) are
imported; when structlog is missing, a small stand-in for farm.logs prints the engine events instead. Without a
GPU it says so and exits 2.

The energy check: idle, then `--load-s` seconds of matrix multiplications on the card, then idle, sampled as the
worker samples (farm.worker.energy, every 50 ms). Over the steady middle of the load (a second in from each
end) the energy from NVML's total-energy counter and the trapezoid over `nvmlDeviceGetPowerUsage` must agree
within 10% (the power reading is itself averaged over up to a second on recent drivers, hence the steady
window), the load must draw more than idle, and no more than the card's power limit (+10%).

Order matters: the stop check runs before this process touches CUDA, because its own CUDA context would
count as a compute process on the card.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

GIB_MIB = 1024
TOLERANCE = 0.05
"""The sampled peak must rise by the allocation ± 5%."""
ENERGY_TOLERANCE = 0.10
"""The counter's and the power samples' energy over the steady load must agree within 10%."""

CHILD_ALLOCATES = """
import signal, sys, time, torch
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # like a stuck engine core: only SIGKILL ends it
x = torch.empty(int(sys.argv[1]) * 2**30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("allocated", flush=True)
while True:
    time.sleep(1)
"""


def _logs_stand_in() -> None:
    """farm.logs needs structlog; a host with only torch and NVML gets a printing stand-in."""
    if importlib.util.find_spec("structlog") is not None:
        return

    class _PrintLogger:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getattr__(self, level: str) -> Callable[..., None]:
            def emit(event: str, **fields: Any) -> None:
                print(f"  [{level}] {event} {fields}", flush=True)

            return emit

    module = types.ModuleType("farm.logs")
    module.get_logger = _PrintLogger  # type: ignore[attr-defined]
    sys.modules["farm.logs"] = module


def _line(name: str, ok: bool, detail: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    return ok


def check_probe(probe: Any) -> bool:
    """The NVML report: a known hardware id and every provenance detail."""
    from farm.errors import FarmError

    try:
        report = probe.report()
    except FarmError as exc:
        return _line("nvml report", False, str(exc))
    print(f"  hardware: {report.hardware_id} x {report.count}")
    for gpu in report.gpus:
        print(f"  gpu {gpu.index}: {gpu.name} {gpu.uuid} {gpu.memory_total_mib} MiB, power limit {gpu.power_limit_w} W")
    print(f"  driver {report.driver_version}, CUDA {report.cuda_version}, interconnect {report.interconnect}")
    print(f"  memory used (MiB): {probe.memory_used_mib()}, compute processes: {probe.compute_processes()}")
    ok = report.hardware_id != "cpu" and report.count >= 1 and report.driver_version and report.cuda_version
    return _line("nvml report", bool(ok), f"{report.hardware_id} x {report.count}")


def check_stop(probe: Any, gib: int, log_dir: Path) -> bool:
    """A child that allocates GPU memory and ignores SIGTERM, in its own group via the engine supervisor, is
    stopped; then the cards must be free (no compute process, memory back under the threshold)."""
    from farm.engines.vllm.process import VllmEngineProcess
    from farm.errors import EngineError

    baseline = probe.memory_used_mib()
    engine = VllmEngineProcess(
        (sys.executable, "-c", CHILD_ALLOCATES, str(gib)),
        env=dict(os.environ),
        log_path=log_dir / "child.log",
        base_url="http://127.0.0.1:9",
        served_model="none",
        stop_grace_s=2.0,
        probe=probe,
        gpu_free_deadline_s=30.0,
    )
    engine.start()
    deadline = time.monotonic() + 120
    while "allocated" not in engine.log_text():
        if not engine.alive() or time.monotonic() > deadline:
            engine.stop()
            return _line("stop check", False, f"the child never allocated:\n{engine.log_tail()}")
        time.sleep(0.2)
    during = probe.memory_used_mib()
    seen = probe.compute_processes()
    print(f"  while allocated: memory {during} MiB (before {baseline}), compute processes {seen}")
    rose = any(d - b >= gib * GIB_MIB * (1 - TOLERANCE) for d, b in zip(during, baseline, strict=False))
    started = time.monotonic()
    try:
        status = engine.stop()
    except EngineError as exc:
        return _line("stop check", False, str(exc))
    after = probe.memory_used_mib()
    print(f"  stopped with status {status} in {time.monotonic() - started:.1f} s; memory now {after} MiB")
    return _line("stop check", rose, "cards free after stop" + ("" if rose else ", but the allocation was not seen"))


def _probe_position(probe: Any, properties: Any, card: int) -> int:
    """Where torch's card sits among the probe's cards: by UUID (CUDA_VISIBLE_DEVICES may reorder), else by index."""
    uuid = str(getattr(properties, "uuid", "") or "")
    if uuid:
        for position, gpu in enumerate(probe.report().gpus):
            if gpu.uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return position
    return probe.indices.index(card) if card in probe.indices else 0


def check_sampler(probe: Any, gib: int, card: int) -> bool:
    """The sampled peak rises by a known torch allocation, ± 5%."""
    from farm.worker.memory import PeakMemorySampler

    torch = importlib.import_module("torch")

    torch.cuda.set_device(card)
    torch.ones(1, device="cuda")  # the CUDA context first, so the baseline includes it
    torch.cuda.synchronize()
    time.sleep(0.5)
    index = _probe_position(probe, torch.cuda.get_device_properties(card), card)
    baseline = probe.memory_used_mib()[index]
    with PeakMemorySampler(probe.memory_used_mib, interval_s=0.1) as sampler:
        block = torch.empty(gib * 2**30, dtype=torch.uint8, device="cuda")
        block.fill_(1)
        torch.cuda.synchronize()
        time.sleep(1.0)
        del block
        torch.cuda.empty_cache()
    rise = sampler.peaks_mib[index] - baseline
    expected = gib * GIB_MIB
    ok = abs(rise - expected) <= expected * TOLERANCE and sampler.errors == 0
    return _line("peak memory", ok, f"peak rose {rise} MiB for {expected} MiB allocated (errors {sampler.errors})")


def check_energy(probe: Any, card: int, load_s: float) -> bool:
    """NVML's energy counter against its own power samples over a steady load, through the worker's sampler and
    the farm's integration (farm.bench.energy), on the card torch allocates on."""
    from farm.bench.energy import CardEnergy, EnergySample, card_window_energy
    from farm.worker.energy import EnergySampler

    torch = importlib.import_module("torch")
    torch.cuda.set_device(card)
    index = _probe_position(probe, torch.cuda.get_device_properties(card), card)
    first = probe.power()
    if not first.cards:
        return _line("energy counter", False, f"the probe reads no power: {first.unavailable}")
    if first.cards[index].energy_mj is None:
        return _line("energy counter", False, "this card has no total-energy counter (NOT_SUPPORTED before Volta)")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    with EnergySampler(probe.power) as sampler:
        time.sleep(2.0)
        load_start = time.perf_counter_ns()
        while time.perf_counter_ns() - load_start < load_s * 1e9:
            for _ in range(20):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
        load_end = time.perf_counter_ns()
        time.sleep(2.0)
    series = sampler.series[index]
    start, end = load_start + 1_000_000_000, load_end - 1_000_000_000
    by_counter = card_window_energy(series, start, end)
    by_power = card_window_energy([EnergySample(t_ns=s.t_ns, power_mw=s.power_mw) for s in series], start, end)
    idle = card_window_energy(series, load_end + 1_000_000_000, load_end + 1_900_000_000)
    print(f"  readings: {len(series)} over {(series[-1].t_ns - series[0].t_ns) / 1e9:.1f} s, errors {sampler.errors}")
    print(f"  steady load ({(end - start) / 1e9:.1f} s): counter {by_counter}, power samples {by_power}")
    print(f"  idle after: {idle}")
    if not isinstance(by_counter, CardEnergy) or not isinstance(by_power, CardEnergy):
        return _line("energy counter", False, "the steady window could not be measured (see the reasons above)")
    agree = abs(by_counter.energy_j - by_power.energy_j) <= ENERGY_TOLERANCE * by_power.energy_j
    limit_w = probe.report().gpus[index].power_limit_w
    within_limit = limit_w is None or by_counter.avg_power_w <= limit_w * 1.10
    above_idle = not isinstance(idle, CardEnergy) or by_counter.avg_power_w > idle.avg_power_w
    detail = (
        f"counter {by_counter.energy_j:.1f} J ({by_counter.avg_power_w:.0f} W) vs power samples "
        f"{by_power.energy_j:.1f} J ({by_power.avg_power_w:.0f} W); limit {limit_w} W"
    )
    return _line("energy counter", agree and within_limit and above_idle, detail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gib", type=int, default=8, help="GiB to allocate for the sampler and stop checks")
    parser.add_argument("--card", type=int, default=0, help="the CUDA device (torch index) to allocate on")
    parser.add_argument("--load-s", type=float, default=8.0, help="seconds of load for the energy check")
    args = parser.parse_args(argv)

    _logs_stand_in()
    # Ask NVML, not the CUDA driver, whether there is a GPU: this process must hold no CUDA context before the
    # stop check.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        print("no GPU check possible: PyTorch is not installed", file=sys.stderr)
        return 2
    from farm.errors import FarmError
    from farm.hardware.nvml import NvmlProbe

    try:
        probe = NvmlProbe()
    except FarmError as exc:
        print(f"no GPU check possible: {exc}", file=sys.stderr)
        return 2
    if not probe.indices or not torch.cuda.is_available():
        print("no GPU on this host (NVML or CUDA sees none): nothing to check", file=sys.stderr)
        return 2

    results = [check_probe(probe)]
    with tempfile.TemporaryDirectory() as tmp:
        results.append(check_stop(probe, args.gib, Path(tmp)))
    results.append(check_sampler(probe, args.gib, args.card))
    results.append(check_energy(probe, args.card, args.load_s))
    probe.close()
    verdict = all(results)
    print(f"VERDICT: {'PASS' if verdict else 'FAIL'} ({sum(results)}/{len(results)} checks passed)")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
