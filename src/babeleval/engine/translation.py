"""A translation model's conventions, read from the model itself: what its encoder reads for a
translation request (the source sentence alone, no prompt, no demonstrations) and which token
its decoder is forced to start with.

- NLLB-200 and M2M100 (`m2m_100`): the encoder reads `[source language] text </s>`, as
  NllbTokenizer and M2M100Tokenizer write it for `src_lang`; the first decoder token after
  decoder_start_token_id is the target language's (transformers' `forced_bos_token_id`).
  NLLB's language tokens are the FLORES-200 codes themselves (hin_Deva), M2M100's `__hi__`.
- MADLAD-400 (a T5 whose vocabulary holds `<2xx>` target tags): the encoder reads
  `<2xx> text </s>`; the decoder starts as any T5's.
- Any other model (decoders, mT5/mT0) has none: it is prompted with the task's prompt.

Languages arrive as FLORES-200 codes (requests.Translation); a model's own code for one is
looked up in its vocabulary: the code itself (NLLB), then the ISO 639-1 code where one exists,
then ISO 639-3 (M2M100's and MADLAD's tags)."""
from __future__ import annotations

from functools import lru_cache

from ..errors import BabelevalError
from ..requests import Translation


@lru_cache(maxsize=None)
def language_codes(flores: str) -> tuple[str, ...]:
    """A FLORES-200 code's shorter names, most specific first: ISO 639-1 where CLDR knows one
    (npi -> ne, swh -> sw), ISO 639-3, then the code itself."""
    from babel import Locale, UnknownLocaleError

    iso3 = flores.split("_")[0]
    try:
        short = Locale.parse(iso3).language
    except (UnknownLocaleError, ValueError):
        short = iso3
    return tuple(dict.fromkeys([short, iso3, flores]))


class Conventions:
    """How one translation model reads a request: encoder_ids and the forced first token."""

    name = ""
    forms: tuple[str, ...] = ()  # how the vocabulary spells a language's token

    def __init__(self, model):
        self.model = model
        self.tokenizer = model.tokenizer
        self.found: dict[str, tuple[str, int] | None] = {}

    def language_token(self, flores: str) -> int:
        return self.spelled(flores)[1]

    def spelled(self, flores: str) -> tuple[str, int]:
        """The vocabulary entry standing for a language and its id."""
        found = self.lookup(flores)
        if found is None:
            raise BabelevalError(f"{self.model.source}: the {self.name} model has no token for language {flores} "
                                 f"(tried {', '.join(self.spellings(flores))}); run the task's subsets in languages it knows")
        return found

    def lookup(self, flores: str) -> tuple[str, int] | None:
        if flores not in self.found:
            ids = ((token, self.tokenizer.token_id(token)) for token in self.spellings(flores))
            self.found[flores] = next(((t, i) for t, i in ids if i is not None and i != self.tokenizer.unk_id), None)
        return self.found[flores]

    def spellings(self, flores: str) -> list[str]:
        """The vocabulary entries that may stand for a language, in the order tried."""
        return [form.format(code) for form in self.forms
                for code in ((flores,) if form == "{}" else language_codes(flores))]

    def encoder_ids(self, t: Translation) -> list[int]:
        raise NotImplementedError

    def forced(self, t: Translation) -> int | None:
        return None


class LanguageTokens(Conventions):
    """NLLB-200 and M2M100: source language token, text, </s>; the target's token forced first."""

    name = "NLLB/M2M100"
    forms = ("{}", "__{}__")

    def encoder_ids(self, t: Translation) -> list[int]:
        return [self.language_token(t.source)] + self.tokenizer.encode(t.text) + [self.tokenizer.eos_id]

    def forced(self, t: Translation) -> int | None:
        return self.language_token(t.target)


class TargetTag(Conventions):
    """MADLAD-400: the target's <2xx> tag, then the text with the tokenizer's special tokens (</s>)."""

    name = "MADLAD-400"
    forms = ("<2{}>",)

    def encoder_ids(self, t: Translation) -> list[int]:
        """`<2xx> text` through the model's own tokenizer, as the model card writes it (a hub
        tokenizer.json may split the tag's leading space as its SentencePiece model does)."""
        return self.tokenizer.encode_batch([f"{self.spelled(t.target)[0]} {t.text}"], special_tokens=True)[0]


def translation_conventions(model) -> Conventions | None:
    """The model's conventions, or None for a model that is prompted (decoders, mT5, mT0)."""
    config, tokenizer = model.config, model.tokenizer
    if config.kind != "seq2seq":
        return None
    if config.arch == "m2m_100":
        return LanguageTokens(model)
    if tokenizer.token_id("<2en>") not in (None, tokenizer.unk_id):
        return TargetTag(model)
    return None


def refuse_untranslatable(model, conventions: Conventions, task: str = "this task") -> BabelevalError:
    """A request with no languages, for a model that needs them: one line saying so."""
    return BabelevalError(f"{model.source}: a {conventions.name} translation model reads a source sentence with its "
                          f"languages, and {task} gives none: run a task with a translation: block (source and "
                          "target FLORES-200 codes, e.g. sib200-translate, indicgenbench-flores, nusax-mt)")
