"""`python -m recsync.tools.box`: the same commands as `recsync box`."""

from recsync.tools.box.cli import box_app

box_app(prog_name="python -m recsync.tools.box")
