"""What the simulator counts: vLLM's Prometheus metrics (names, labels, buckets as vLLM v1
exports them) and the server's own schedule lateness.

The metric set follows vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py: labels model_name and
engine="0"; counters end in `_total`; histograms carry vLLM's buckets. Rendering is plain text in the
Prometheus exposition format, written by hand (no prometheus_client dependency).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip

FINISHED_REASONS = ("stop", "length", "abort")


def build_1_2_5_buckets(max_value: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's buckets for token counts)."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(buckets)
            buckets.append(float(value))
        exponent += 1


@dataclass
class Histogram:
    """A cumulative-on-render histogram: counts per bucket, sum and count."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


def _fmt(value: float) -> str:
    return repr(float(value))


class EngineMetrics:
    """Every vLLM metric the simulator serves, for one model on engine 0."""

    def __init__(self, model_name: str, max_model_len: int, num_speculative_tokens: int) -> None:
        self.model_name = model_name
        self.num_speculative_tokens = num_speculative_tokens
        self.running = 0
        self.waiting = 0
        self.kv_cache_usage = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.request_success = dict.fromkeys(FINISHED_REASONS, 0)
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted_tokens = 0
        self.spec_accepted_per_pos = [0] * num_speculative_tokens
        token_buckets = build_1_2_5_buckets(max_model_len)
        self.histograms: dict[str, tuple[str, Histogram]] = {
            "vllm:time_to_first_token_seconds": (
                "Histogram of time to first token in seconds.",
                Histogram(TTFT_BUCKETS),
            ),
            "vllm:inter_token_latency_seconds": (
                "Histogram of inter-token latency in seconds.",
                Histogram(ITL_BUCKETS),
            ),
            "vllm:request_time_per_output_token_seconds": (
                "Histogram of time_per_output_token_seconds per request.",
                Histogram(ITL_BUCKETS),
            ),
            "vllm:e2e_request_latency_seconds": (
                "Histogram of e2e request latency in seconds.",
                Histogram(REQUEST_LATENCY_BUCKETS),
            ),
            "vllm:request_queue_time_seconds": (
                "Histogram of time spent in WAITING phase for request.",
                Histogram(REQUEST_LATENCY_BUCKETS),
            ),
            "vllm:request_prefill_time_seconds": (
                "Histogram of time spent in PREFILL phase for request.",
                Histogram(REQUEST_LATENCY_BUCKETS),
            ),
            "vllm:request_decode_time_seconds": (
                "Histogram of time spent in DECODE phase for request.",
                Histogram(REQUEST_LATENCY_BUCKETS),
            ),
            "vllm:request_prompt_tokens": ("Number of prefill tokens processed.", Histogram(token_buckets)),
            "vllm:request_generation_tokens": (
                "Number of generation tokens processed.",
                Histogram(token_buckets),
            ),
        }
        self.ttft = self.histograms["vllm:time_to_first_token_seconds"][1]
        self.itl = self.histograms["vllm:inter_token_latency_seconds"][1]
        self.tpot = self.histograms["vllm:request_time_per_output_token_seconds"][1]
        self.e2e = self.histograms["vllm:e2e_request_latency_seconds"][1]
        self.queue_time = self.histograms["vllm:request_queue_time_seconds"][1]
        self.prefill_time = self.histograms["vllm:request_prefill_time_seconds"][1]
        self.decode_time = self.histograms["vllm:request_decode_time_seconds"][1]
        self.prompt_tokens_hist = self.histograms["vllm:request_prompt_tokens"][1]
        self.generation_tokens_hist = self.histograms["vllm:request_generation_tokens"][1]

    def observe_draft(self, accepted: int) -> None:
        """One speculative step: K draft tokens, `accepted` of them accepted (a prefix, as vLLM counts)."""
        self.spec_drafts += 1
        self.spec_draft_tokens += self.num_speculative_tokens
        self.spec_accepted_tokens += accepted
        per_pos = self.spec_accepted_per_pos
        for pos in range(min(accepted, len(per_pos))):
            per_pos[pos] += 1

    def render(self) -> str:
        """The Prometheus text exposition of every metric."""
        name = self.model_name.replace("\\", "\\\\").replace('"', '\\"')
        labels = f'model_name="{name}",engine="0"'
        out: list[str] = []

        def scalar(metric: str, kind: str, help_text: str, value: float) -> None:
            out.append(f"# HELP {metric} {help_text}")
            out.append(f"# TYPE {metric} {kind}")
            out.append(f"{metric}{{{labels}}} {_fmt(value)}")

        scalar(
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            self.running,
        )
        scalar("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", self.waiting)
        scalar(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            self.kv_cache_usage,
        )
        scalar(
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            self.prefix_cache_queries,
        )
        scalar(
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            self.prefix_cache_hits,
        )
        scalar(
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemption from the engine.",
            self.preemptions,
        )
        scalar("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", self.prompt_tokens)
        scalar(
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            self.generation_tokens,
        )
        out.append("# HELP vllm:request_success_total Count of successfully processed requests.")
        out.append("# TYPE vllm:request_success_total counter")
        for reason, value in self.request_success.items():
            out.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {_fmt(value)}')
        if self.num_speculative_tokens > 0:
            scalar(
                "vllm:spec_decode_num_drafts_total",
                "counter",
                "Number of spec decoding drafts.",
                self.spec_drafts,
            )
            scalar(
                "vllm:spec_decode_num_draft_tokens_total",
                "counter",
                "Number of draft tokens.",
                self.spec_draft_tokens,
            )
            scalar(
                "vllm:spec_decode_num_accepted_tokens_total",
                "counter",
                "Number of accepted tokens.",
                self.spec_accepted_tokens,
            )
            metric = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
            out.append(f"# HELP {metric} Accepted tokens per draft position.")
            out.append(f"# TYPE {metric} counter")
            for pos, value in enumerate(self.spec_accepted_per_pos):
                out.append(f'{metric}{{{labels},position="{pos}"}} {_fmt(value)}')
        for metric, (help_text, hist) in self.histograms.items():
            out.append(f"# HELP {metric} {help_text}")
            out.append(f"# TYPE {metric} histogram")
            cumulative = 0
            for bound, count in zip(hist.buckets, hist.counts, strict=False):
                cumulative += count
                out.append(f'{metric}_bucket{{{labels},le="{_fmt(bound)}"}} {_fmt(cumulative)}')
            out.append(f'{metric}_bucket{{{labels},le="+Inf"}} {_fmt(hist.count)}')
            out.append(f"{metric}_count{{{labels}}} {_fmt(hist.count)}")
            out.append(f"{metric}_sum{{{labels}}} {_fmt(hist.total)}")
        return "\n".join(out) + "\n"


SGLANG_NAMES: dict[str, str] = {
    "vllm:num_requests_running": "sglang:num_running_reqs",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
    "vllm:kv_cache_usage_perc": "sglang:token_usage",
    "vllm:prompt_tokens_total": "sglang:prompt_tokens_total",
    "vllm:prefix_cache_hits_total": "sglang:cached_tokens_total",
    "vllm:generation_tokens_total": "sglang:generation_tokens_total",
    "vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds": "sglang:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds": "sglang:e2e_request_latency_seconds",
}
"""vLLM's metrics that SGLang also serves (python/sglang/srt/metrics/collector.py), under SGLang's names.
SGLang has no counterpart of the others (its speculative decoding is a gauge of the accept length), so an
SGLang-speaking simulator leaves them out, as the real server does."""

_HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def sglang_exposition(vllm_text: str) -> str:
    """A vLLM exposition rewritten as SGLang serves it: the metrics SGLang has, under its names, labelled by
    model only; the rest dropped."""
    out: list[str] = []
    for line in vllm_text.splitlines():
        if line.startswith("# "):
            marker, name, rest = [*line.split(" ", 3)[1:], "", ""][:3]
            if name in SGLANG_NAMES:
                out.append(f"# {marker} {SGLANG_NAMES[name]} {rest}".rstrip())
            continue
        name, brace, rest = line.partition("{")
        base = name
        suffix = ""
        for ending in _HISTOGRAM_SUFFIXES:
            if name.endswith(ending) and name[: -len(ending)] in SGLANG_NAMES:
                base, suffix = name[: -len(ending)], ending
        if base in SGLANG_NAMES and brace:
            labels = rest.replace(',engine="0"', "")
            out.append(f"{SGLANG_NAMES[base]}{suffix}{{{labels}")
    return "\n".join(out) + "\n"


def llamacpp_exposition(prompt_tokens: int, generation_tokens: int) -> str:
    """/metrics as llama-server serves it with --metrics: its token counters (it counts no prefix-cache hits
    under a name the farm maps; the hit rate is in each answer's `timings.cache_n`)."""
    return (
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        f"llamacpp:prompt_tokens_total {prompt_tokens}\n"
        "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n"
        "# TYPE llamacpp:tokens_predicted_total counter\n"
        f"llamacpp:tokens_predicted_total {generation_tokens}\n"
    )


class LatenessRecorder:
    """Per-chunk lateness of the server's own schedule (write time minus due time), as a log-linear histogram.

    Exact to the microsecond below LINEAR_US, then buckets 1% wide: recording is one increment in the write
    path, and percentiles are a scan of a few thousand buckets.
    """

    LINEAR_US = 2048
    LOG_BUCKETS = 2048  # 1% steps from 2 ms: the last bucket starts near 2 ms * 1.01**2047, far beyond any run
    _LOG_STEP = math.log(1.01)

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.clear()

    def clear(self) -> None:
        self.counts = [0] * (self.LINEAR_US + self.LOG_BUCKETS)

    def record_ns(self, lateness_ns: int) -> None:
        us = lateness_ns // 1000
        if us < self.LINEAR_US:
            self.counts[us if us > 0 else 0] += 1
            return
        index = self.LINEAR_US + int(math.log(us / self.LINEAR_US) / self._LOG_STEP)
        self.counts[min(index, len(self.counts) - 1)] += 1

    def _bucket_value_us(self, index: int) -> float:
        if index < self.LINEAR_US:
            return float(index)
        return self.LINEAR_US * math.exp((index - self.LINEAR_US) * self._LOG_STEP)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def percentile_us(self, q: float) -> float | None:
        """The q-quantile (0..1) in µs (its bucket's lower edge); None when nothing was recorded."""
        total = self.count
        if total == 0:
            return None
        rank = max(1, math.ceil(q * total))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return self._bucket_value_us(index)
        raise AssertionError("unreachable: the counts sum to total")

    def summary(self) -> dict[str, float | int | None]:
        total = self.count
        top = max((i for i, n in enumerate(self.counts) if n), default=None)
        mean = sum(self._bucket_value_us(i) * n for i, n in enumerate(self.counts) if n) / total if total else None
        return {
            "chunks": total,
            "p50_us": self.percentile_us(0.50),
            "p90_us": self.percentile_us(0.90),
            "p99_us": self.percentile_us(0.99),
            "p999_us": self.percentile_us(0.999),
            "max_us": None if top is None else self._bucket_value_us(top),
            "mean_us": mean,
        }
