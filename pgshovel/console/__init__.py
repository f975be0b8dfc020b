"""The read-only web console (``pgshovel-admin serve``): clusters, sets, relays, copies, charts.

Pages and a JSON API are read from ZooKeeper (configuration, election, the
processes' status nodes) and from each set's database (the queue's backlog);
charts are SVG drawn here from the hour of samples every relay and worker
keeps in its status. Needs the ``console`` extra (Starlette, uvicorn, Jinja2):
``require_console`` says so in one line when it is missing.
"""

from __future__ import annotations

import importlib.util

from pgshovel.errors import ConfigurationError

__all__ = ["require_console"]

MODULES = ("starlette", "uvicorn", "jinja2")


def require_console() -> None:
    """A ``ConfigurationError`` naming the extra to install when a library is missing."""
    missing = [name for name in MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"the console needs {', '.join(missing)}: pip install 'pgshovel[console]'"
        )
