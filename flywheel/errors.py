"""The one error type users see: a clear one-line message and a non-zero exit from the CLI."""


class GalahadError(Exception):
    """A user-facing failure. The CLI prints `galahad: error: <message>` on one line and exits 2."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class IntegrityError(GalahadError):
    """Bytes do not match their hash, or fingerprints do not match: refused, never used."""


class ChainConflict(GalahadError):
    """An artifact does not extend its library's current tail (another job appended first): redo it."""
