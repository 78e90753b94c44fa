"""Project error types: user mistakes raise these, internal invariants use assert."""


class RecsyncError(ValueError):
    """Base class for errors caused by user input (config, data, arguments)."""


class ConfigError(RecsyncError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


class DataError(RecsyncError):
    """A data line or record is malformed; the message names file, line and field."""

    def __init__(self, message: str, *, source: str = "", line: int = 0, field: str = ""):
        where = ", ".join(
            part
            for part in (
                f"file {source}" if source else "",
                f"line {line}" if line else "",
                f"field {field}" if field else "",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)
        self.source = source
        self.line = line
        self.field = field


class JobFailed(RuntimeError):
    """A distributed job could not finish: a node died, hung or failed (named in the text)."""
