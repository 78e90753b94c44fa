"""recsync: distributed training of deep recommendation models with switchable sync strategies.

`recsync.Job` is the Python API (recsync.app.api): a job from a TOML file or a dict,
`.train()` on Ray, `.simulate()` in the cluster simulator. It is imported on first use, so
that `import recsync` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recsync.app.api import Job

__version__ = "0.1.0"
__all__ = ["Job", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Job":
        from recsync.app.api import Job

        return Job
    raise AttributeError(f"module 'recsync' has no attribute {name!r}")
