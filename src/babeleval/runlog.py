"""run.log in the run folder: every message of the run (what loaded, each task's start, end,
score and resumed records, warnings such as truncated prompts, the error that stopped it),
with times, appended across resumed runs. Warnings also reach the terminal. Library code
warns through logging.getLogger("babeleval"); outside a run they print as Python's do."""
from __future__ import annotations

import logging
from pathlib import Path

LOGGER = logging.getLogger("babeleval")


class _Echo(logging.Handler):
    def __init__(self, echo):
        super().__init__(logging.WARNING)
        self.echo = echo

    def emit(self, record):
        self.echo(f"warning: {record.getMessage()}")


class RunLog:
    def __init__(self, folder: Path, echo):
        self.path = Path(folder) / "run.log"
        self.echo = echo
        self.file = logging.FileHandler(self.path, encoding="utf-8")
        self.file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
        self.terminal = _Echo(echo)
        LOGGER.addHandler(self.file)
        LOGGER.addHandler(self.terminal)
        self.level = LOGGER.level
        LOGGER.setLevel(logging.INFO)

    def __call__(self, message: str) -> None:
        """A progress message: on the terminal and in the log."""
        self.echo(message)
        LOGGER.info(message)

    def info(self, message: str) -> None:
        """In the log only."""
        LOGGER.info(message)

    def close(self) -> None:
        LOGGER.removeHandler(self.file)
        LOGGER.removeHandler(self.terminal)
        LOGGER.setLevel(self.level)
        self.file.close()


def warn_once(owner, key: str, message: str) -> None:
    """A warning the first time `owner` (an engine) meets `key`; later ones only count."""
    seen = owner.__dict__.setdefault("_warned", set())
    if key not in seen:
        seen.add(key)
        LOGGER.warning(message)
