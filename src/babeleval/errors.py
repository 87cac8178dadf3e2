"""One exception type for everything a user can get wrong, so the CLI can print it in one line."""


class BabelevalError(Exception):
    """A problem with the user's input (file, model, task), stated precisely enough to fix it."""
