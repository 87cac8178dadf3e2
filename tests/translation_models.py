"""Tiny random translation models shaped as NLLB-200, M2M100 and MADLAD-400 (no real ones exist
offline), each with a real SentencePiece model (mistral-common's 32k) given its family's language
tokens as transformers' tokenizer class writes them: NllbTokenizer's FLORES-200 codes (hin_Deva),
M2M100Tokenizer's __hi__ (a fairseq vocab.json beside the model), MADLAD's <2hi> tags. Weights
drawn with std 0.2, so that greedy choices are far from ties and a wrong language token shows."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from tiny_models import SEQ2SEQ, T5_COMMON

MADLAD_TAGS = ("<2en>", "<2hi>", "<2sw>", "<2am>", "<2id>", "<2jv>", "<2su>")


def _sentencepiece(folder: Path, name: str) -> Path:
    data = Path(importlib.util.find_spec("mistral_common").submodule_search_locations[0]) / "data"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(data / "tokenizer.model.v1", folder / name)
    return folder / name


def _nllb_tokenizer(folder: Path):
    import transformers
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    _sentencepiece(folder, "sentencepiece.bpe.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NllbTokenizer"}))
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), extra_special_tokens=FAIRSEQ_LANGUAGE_CODES)
    (folder / "sentencepiece.bpe.model").unlink()
    tok.save_pretrained(folder)  # tokenizer.json, as the hub's NLLB folders have it
    return tok


def _m2m100_tokenizer(folder: Path):
    import sentencepiece
    import transformers

    model = _sentencepiece(folder, "sentencepiece.bpe.model")
    sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}  # fairseq's dictionary: its specials, then the pieces
    vocab.update({sp.id_to_piece(i): i + 1 for i in range(3, sp.get_piece_size())})
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "M2M100Tokenizer"}))
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    tok.save_pretrained(folder)
    return tok


def _madlad_tokenizer(folder: Path):
    import transformers

    _sentencepiece(folder, "spiece.model")
    tok = transformers.T5Tokenizer.from_pretrained(str(folder))
    tok.add_tokens(list(MADLAD_TAGS))
    tok.save_pretrained(folder)
    return tok


def build_translation_model(family: str, folder: Path):
    """Save a random `family` model (nllb, m2m100, madlad) with its tokenizer into folder; return
    (transformers' model loaded back from it, its tokenizer)."""
    import torch
    import transformers

    tok = {"nllb": _nllb_tokenizer, "m2m100": _m2m100_tokenizer, "madlad": _madlad_tokenizer}[family](folder)
    vocab = max([*tok.get_vocab().values(), *getattr(tok, "lang_token_to_id", {}).values()]) + 1  # M2M100's: apart
    special = dict(pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    if family == "madlad":  # T5 v1.1 (MADLAD-400's own model_type is t5), untied head
        config = transformers.T5Config(**{**T5_COMMON, **special, "vocab_size": vocab, "feed_forward_proj": "gated-gelu",
                                          "tie_word_embeddings": False, "decoder_start_token_id": tok.pad_token_id})
    else:
        config = transformers.M2M100Config(**{**SEQ2SEQ["m2m_100"][1], **special, "vocab_size": vocab,
                                              "bos_token_id": tok.bos_token_id, "decoder_start_token_id": tok.eos_token_id})
    torch.manual_seed(0)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.1 if "norm" in name.lower() or name.endswith("bias") else 0.2)
                    + (1.0 if "norm" in name.lower() and name.endswith("weight") else 0.0))
    model.save_pretrained(folder)
    if family == "madlad":  # transformers 5 ties a fresh T5's head: write the untied one real files hold
        from safetensors.torch import load_file, save_file

        tensors = load_file(folder / "model.safetensors")
        tensors["lm_head.weight"] = torch.randn(vocab, config.d_model, generator=torch.Generator().manual_seed(1)) * 0.2
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval(), tok
