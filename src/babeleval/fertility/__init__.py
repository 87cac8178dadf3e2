"""Tokenizer fertility audit: `babeleval fertility`."""
from .audit import audit
from .corpora import UDHR_LANGUAGES
from .report import write_report
from .tokenizers import DEFAULT_TOKENIZERS, load_audit_tokenizer

__all__ = ["audit", "write_report", "load_audit_tokenizer", "DEFAULT_TOKENIZERS", "UDHR_LANGUAGES"]
