"""The `recsync` command line (typer). `main` is the installed command: it loads the
application inside its guard, so that Ctrl-C while torch and Ray load exits quietly."""

import sys

__all__ = ["main"]


def main() -> None:
    try:
        from recsync.app.cli.main import app

        app()
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        sys.exit(130)
