"""The registry's model instances: what a recipe's `model_instance_id` names.

A LocalMaxxing run recorded in the registry often names its model only by an instance id
(`bartowski-deepseek-r1-distill-qwen-14b-gguf--q4-k-m`). The instance document says which Hugging Face
repository, revision and quantization that is. The farm ships those documents' identity fields as data
(`registry_instances.json`, made by deploy/refresh-instances.py from a registry checkout), the way it ships the
hardware catalogue, so that such a recipe's command can be built from its real model.

What each engine is given for an instance (`model_for`):
- vLLM, SGLang and TabbyAPI load a repository of weights: the instance's repository. A GGUF instance names one
  file they cannot be given, and an instance the snapshot lacks names no repository: both are refused.
- llama.cpp, Ollama, LM Studio and MLX serve a local artifact (a GGUF file, an MLX folder) that the host maps
  the model id to (the worker profile's model_paths), and load the model a request names. The run was on that
  runtime, so the artifact was one it loads: the command names a download only when the instance's repository is
  that artifact (a GGUF repository with a known quantization, `REPO:Q4_K_M` as `llama-server -hf` and
  `ollama run hf.co/...` spell it; an MLX repository). Otherwise the model is the instance id itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from farm.engines.registry import ENGINES

DATA_FILE = "registry_instances.json"

GGUF_QUANT = re.compile(
    r"^(?:UD-|GGUF-)?(?:I?Q\d+(?:_[0-9A-Z]+)*|TQ\d_\d|MXFP4(?:_MOE)?|BF16|F16|F32)$",
    re.IGNORECASE,
)
"""llama.cpp's quantization type names (Q4_K_M, IQ2_XXS, UD-Q2_K_XL, Q8_0, TQ1_0, MXFP4_MOE, BF16)."""

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Instance:
    """The identity of one registry model instance."""

    id: str
    repository: str
    revision: str | None
    format: str | None
    precision: str | None
    served_name: str | None

    @property
    def quantization(self) -> str | None:
        """The GGUF quantization type the instance names (from its precision or format), if it is one."""
        for value in (self.precision, self.format):
            if isinstance(value, str) and GGUF_QUANT.match(value.strip()):
                return value.strip().upper().removeprefix("GGUF-")
        return None

    @property
    def on_the_hub(self) -> bool:
        """Whether the repository is a Hugging Face repository id (`owner/name`); some instances name a bare
        artifact or a web page instead."""
        return REPO_ID.match(self.repository) is not None

    @property
    def gguf_repository(self) -> bool:
        """Whether the repository itself holds GGUF files (its name says so, as GGUF publishers name them)."""
        return self.on_the_hub and "gguf" in self.repository.lower()


@cache
def _shipped() -> dict[str, Instance]:
    text = resources.files(__package__).joinpath(DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    found: dict[str, Instance] = {}
    for key, row in data["instances"].items():
        found[key] = Instance(
            id=key,
            repository=row["repository"],
            revision=row.get("revision"),
            format=row.get("format"),
            precision=row.get("precision"),
            served_name=row.get("served_name"),
        )
    return found


def lookup(instance_id: str) -> Instance | None:
    """The shipped instance with this id, if the farm's snapshot of the registry has it."""
    return _shipped().get(instance_id)


def snapshot_size() -> int:
    return len(_shipped())


GGUF_ENGINES = frozenset(name for name, kind in ENGINES.items() if kind.artifact == "gguf")
LOCAL_ARTIFACT_ENGINES = frozenset(name for name, kind in ENGINES.items() if kind.artifact is not None)
"""Runtimes that serve a local artifact (a GGUF file, an MLX folder) which a host maps a model id to, and which
load the model a request names: their command need not name one."""


class CannotLoad(ValueError):
    """The engine cannot run this instance (the message says why)."""


def from_hint(instance_id: str, hint: str | None) -> Instance | None:
    """An instance the snapshot lacks, from the repository the registry's own synthesized draft launch names for it
    (`org/Model` or `org/Model-GGUF:Q4_K_M`); None when the hint is no repository id."""
    if not hint:
        return None
    repository, _, quant = hint.partition(":")
    if REPO_ID.match(repository) is None:
        return None
    return Instance(instance_id, repository, None, quant or None, quant or None, None)


def model_for(engine: str, instance_id: str, hint: str | None = None) -> str | None:
    """The model `engine` is given for the registry instance `instance_id`: a repository (or `REPO:QUANT` for GGUF
    runtimes), or None when the host maps the instance id to its own file. CannotLoad when the engine needs a
    repository the farm cannot name. `hint`: the repository the recipe's synthesized draft launch names, used when
    the snapshot lacks the instance."""
    instance = lookup(instance_id) or from_hint(instance_id, hint)
    if instance is None:
        if engine in LOCAL_ARTIFACT_ENGINES:
            return None  # the host maps the id to its file, as for any other artifact of these runtimes
        raise CannotLoad(
            f"{engine} needs the repository of instance {instance_id!r}, which the farm's snapshot of the registry "
            f"({snapshot_size()} instances; deploy/refresh-instances.py updates it) lacks"
        )
    return instance_model(engine, instance)


_NEVER_NATIVE = re.compile(
    r"(?:^|[-_ ])(?:awq|gptq|nvfp4|fp4|int[48]|w[48]a(?:8|16)|autoround|auto-round|exl[23]|bnb|nf4|[2-8]-?bits?)"
    r"(?:$|[-_ ])",
    re.IGNORECASE,
)
"""Quantizations no base repository ships its weights in (a model's own weights may be BF16, FP8 or MXFP4, never
AWQ or NVFP4): an instance in one of them is a separate checkpoint."""

_QUANTIZED_NAME = re.compile(
    r"awq|gptq|nvfp4|fp4|fp8|int[48]|w[48]a(?:8|16)|autoround|auto-round|exl[23]|bnb|nf4|bits?\b|bpw|quant|"
    + "".join(f"{artifact}|" for artifact in sorted({kind.artifact for kind in ENGINES.values() if kind.artifact}))
    + r"mxfp4|marlin|compressed|[-_]q[2-8]",
    re.IGNORECASE,
)
"""What a quantized checkpoint's repository name says of itself (`GLM-4.7-Flash-AWQ`, `Qwen3.6-27B-NVFP4`)."""

BASE_PUBLISHERS = frozenset(
    {
        "qwen",
        "zai-org",
        "google",
        "minimaxai",
        "nvidia",
        "deepseek-ai",
        "meta-llama",
        "mistralai",
        "moonshotai",
        "openai",
        "xiaomimimo",
        "microsoft",
        "ibm-granite",
        "liquidai",
        "poolside",
        "tencent",
        "baidu",
    }
)
"""Publishers of base models who name each quantized release of theirs by its quantization (`Qwen/Qwen3-8B-AWQ`,
`nvidia/Qwen3.6-27B-NVFP4`): one of their repositories named without one holds the base weights. Other publishers
(community quantizers, fine-tuners) may keep a quantized checkpoint under a plain name, so nothing is read from
theirs."""


def base_for_quantized(instance: Instance) -> str | None:
    """The quantization an instance states (its precision, or its id after `--`) when its repository is named like
    a base model that does not hold those weights: the registry's instance (or its synthesized draft) then names the
    base repository for a quantized checkpoint it does not name (`zai-org/GLM-4.5-Air` for `...--awq-4bit`). Loading
    that repository would run other weights than the recipe's. None when the two agree."""
    stated = [instance.precision or "", instance.format or "", instance.id.partition("--")[2]]
    quant = next((value for value in stated if value and _NEVER_NATIVE.search(value)), None)
    owner, _, name = instance.repository.partition("/")
    if quant is None or owner.lower() not in BASE_PUBLISHERS or _QUANTIZED_NAME.search(name):
        return None
    return quant


def instance_model(engine: str, instance: Instance) -> str | None:
    """model_for, for an instance the snapshot has."""
    quant = instance.quantization
    weights = instance.precision or instance.format or "an unknown format"
    if engine in GGUF_ENGINES:
        # The run was on a GGUF runtime, so the artifact was a GGUF: a download is named only when the instance's
        # repository is that GGUF repository and its quantization is known.
        if quant is None or not instance.gguf_repository:
            return None
        return f"{ENGINES[engine].hub_model_prefix}{instance.repository}:{quant}"
    holds_artifact = ENGINES[engine].artifact_repository if engine in ENGINES else None
    if holds_artifact is not None:
        return instance.repository if holds_artifact(instance.repository) else None
    if not instance.on_the_hub:
        raise CannotLoad(
            f"instance {instance.id!r} names no Hugging Face repository ({instance.repository!r}), so {engine} has "
            "nothing to load"
        )
    stated = base_for_quantized(instance)
    if stated is not None:
        raise CannotLoad(
            f"instance {instance.id!r} is a {stated} checkpoint, but the repository it names, {instance.repository!r}, "
            f"is the base model's: {engine} would load other weights than the ones that ran"
        )
    if instance.gguf_repository or (quant is not None and quant not in ("BF16", "F16", "F32")):
        raise CannotLoad(
            f"instance {instance.id!r} is a GGUF file ({weights} of {instance.repository}); {engine} would need "
            "that one file, which the recipe does not name"
        )
    return instance.repository
