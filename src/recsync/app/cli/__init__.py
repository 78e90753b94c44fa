"""The `recsync` command line (typer)."""

from recsync.app.cli.main import app

__all__ = ["app"]
