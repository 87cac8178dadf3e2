"""One tokenizer interface over `tokenizers` (tokenizer.json, GGUF vocabularies),
SentencePiece .model files and raw UTF-8 bytes.

encode() never adds special tokens: where a model wants BOS in front (Gemma, as
lm-evaluation-harness does), the engine adds it, so the context/continuation split
is computed on the same token stream for every family.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

META = "babeleval_tokenizer.json"


@dataclass
class Special:
    bos_id: int | None = None
    eos_id: int | None = None
    pad_id: int | None = None
    add_bos: bool = False


class Tokenizer:
    kind = "base"

    def __init__(self, special: Special):
        self.special = special

    @property
    def bos_id(self):
        return self.special.bos_id

    @property
    def eos_id(self):
        return self.special.eos_id

    @property
    def prefix(self) -> list[int]:
        """Tokens the model expects before any text (BOS for Gemma-style models)."""
        return [self.special.bos_id] if self.special.add_bos and self.special.bos_id is not None else []

    def with_prefix(self, ids: list[int]) -> list[int]:
        """prefix + ids, unless ids already start with it (a chat template that writes BOS
        itself, as Gemma's does): lm-eval's rule (has_bos_prefix), one BOS either way."""
        prefix = self.prefix
        return ids if prefix and ids[: len(prefix)] == prefix else prefix + ids

    unk_id: int | None = None

    def token_id(self, token: str | None) -> int | None:
        """The id of one vocabulary entry (a language token, a tag), None where there is none."""
        return None

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._save_vocab(folder)
        (folder / META).write_text(json.dumps({"kind": self.kind, **self.special.__dict__}))


class HFTokenizer(Tokenizer):
    kind = "tokenizers"

    def __init__(self, backend, special: Special):
        super().__init__(special)
        # a tokenizer.json may carry fixed padding / truncation (all-MiniLM-L6-v2 pads every text
        # to 128 tokens): the engine pads and truncates itself, so the token lists stay exact
        backend.no_padding()
        backend.no_truncation()
        self.backend = backend
        self.vocab_size = backend.get_vocab_size()
        self.unk_id = self.token_id(json.loads(backend.to_str())["model"].get("unk_token"))

    def encode_batch(self, texts, special_tokens: bool = False) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=special_tokens)]

    def decode(self, ids) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=True)

    def token_id(self, token: str | None):
        return None if token is None else self.backend.token_to_id(token)

    def _save_vocab(self, folder: Path) -> None:
        self.backend.save(str(folder / "tokenizer.json"))


class SentencePieceTokenizer(Tokenizer):
    kind = "sentencepiece"

    def __init__(self, model_file: Path, special: Special | None = None):
        import sentencepiece as spm

        self.model_file = Path(model_file)
        self.sp = spm.SentencePieceProcessor(model_file=str(model_file))
        sp_id = lambda i: i if i >= 0 else None
        super().__init__(special or Special(sp_id(self.sp.bos_id()), sp_id(self.sp.eos_id()), sp_id(self.sp.pad_id())))
        self.vocab_size = self.sp.get_piece_size()
        self.unk_id = sp_id(self.sp.unk_id())

    def encode_batch(self, texts, special_tokens: bool = False) -> list[list[int]]:
        return self.sp.encode(list(texts))

    def decode(self, ids) -> str:
        return self.sp.decode(list(ids))

    def token_id(self, token: str | None) -> int | None:
        found = self.sp.piece_to_id(token) if token else None
        return found if found is not None and self.sp.id_to_piece(found) == token else None

    def _save_vocab(self, folder: Path) -> None:
        (folder / "tokenizer.model").write_bytes(self.model_file.read_bytes())


class TransformersTokenizer(Tokenizer):
    """A transformers tokenizer that has no `tokenizers` twin to convert to (M2M100's: SentencePiece
    pieces looked up in a fairseq vocab.json, language tokens added after it), used as it is."""

    kind = "transformers"

    def __init__(self, tok, special: Special):
        super().__init__(special)
        self.tok = tok
        # M2M100's language tokens live outside get_vocab(), after it
        self.vocab_size = max([*tok.get_vocab().values(), *getattr(tok, "lang_token_to_id", {}).values()]) + 1
        self.unk_id = tok.unk_token_id

    def encode_batch(self, texts, special_tokens: bool = False) -> list[list[int]]:
        return [self.tok(t, add_special_tokens=special_tokens)["input_ids"] for t in texts]

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def token_id(self, token: str | None) -> int | None:
        found = self.tok.convert_tokens_to_ids(token) if token else None
        return None if found is None or (found == self.unk_id and token != self.tok.unk_token) else found

    def _save_vocab(self, folder: Path) -> None:
        self.tok.save_pretrained(str(folder))


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as tokens 0-255; byte 0 doubles as BOS/EOS (it never occurs in text)."""

    kind = "bytes"
    vocab_size = 256

    def __init__(self, special: Special | None = None):
        super().__init__(special or Special(0, 0, 0, True))

    def encode_batch(self, texts, special_tokens: bool = False) -> list[list[int]]:
        return [list(t.encode("utf-8")) for t in texts]

    def decode(self, ids) -> str:
        return bytes(i for i in ids if i).decode("utf-8", errors="replace")

    def _save_vocab(self, folder: Path) -> None:
        pass


class TekkenTokenizer(Tokenizer):
    """Mistral's Tekken (tiktoken-style byte-level BPE) through mistral-common; read-only."""

    kind = "tekken"

    def __init__(self, path: Path):
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        self.tekken = Tekkenizer.from_file(str(path))
        super().__init__(Special(self.tekken.bos_id, self.tekken.eos_id, self.tekken.pad_id))
        self.vocab_size = self.tekken.n_words
        self.unk_id = self.tekken.unk_id

    def encode_batch(self, texts, special_tokens: bool = False) -> list[list[int]]:
        # Tekkenizer.encode is its tiktoken model's encode_ordinary shifted past the special
        # tokens (tiktoken's own batch call is ~15x slower on a million single words).
        shift = self.tekken.num_special_tokens
        prefix = [self.tekken.bos_id] if special_tokens else []
        return [prefix + [i + shift for i in ids] for ids in map(self.tekken._model.encode_ordinary, texts)]

    def decode(self, ids) -> str:
        return self.tekken.decode(list(ids))

    def _save_vocab(self, folder: Path) -> None:
        raise NotImplementedError("Tekken tokenizers are read from mistral-common's files, not saved")


def load_tokenizer(folder: Path) -> Tokenizer:
    """Restore a tokenizer written by Tokenizer.save()."""
    meta = json.loads((folder / META).read_text())
    kind = meta.pop("kind")
    special = Special(**meta)
    if kind == "bytes":
        return ByteTokenizer(special)
    if kind == "sentencepiece":
        return SentencePieceTokenizer(folder / "tokenizer.model", special)
    if kind == "transformers":
        from transformers import AutoTokenizer

        return TransformersTokenizer(AutoTokenizer.from_pretrained(str(folder)), special)
    from tokenizers import Tokenizer as Backend

    return HFTokenizer(Backend.from_file(str(folder / "tokenizer.json")), special)


def tokenizer_from_file(path: Path, special: Special | None = None) -> Tokenizer:
    """A bare tokenizer file: tokenizer.json, tekken*.json, a SentencePiece .model, or a folder holding one."""
    path = Path(path)
    if path.is_dir():
        if (path / META).exists():
            return load_tokenizer(path)
        for name in ("tokenizer.json", "tokenizer.model"):
            if (path / name).exists():
                return tokenizer_from_file(path / name, special)
        raise FileNotFoundError(f"{path}: no tokenizer.json or tokenizer.model inside")
    if path.suffix == ".json" and path.name.startswith("tekken"):
        return TekkenTokenizer(path)
    if path.suffix == ".json":
        from tokenizers import Tokenizer as Backend

        backend = Backend.from_file(str(path))
        return HFTokenizer(backend, special or Special())
    return SentencePieceTokenizer(path, special)
