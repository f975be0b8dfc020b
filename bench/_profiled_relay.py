"""``python -m bench._profiled_relay OUT RELAY_YML SET``: pgshovel-relay under cProfile.

The relay's batch loop runs in the main thread, which is what cProfile sees;
the statistics are written to OUT when the relay exits (SIGTERM included,
since the relay turns it into a clean stop). Used by ``python -m bench --profile``.
"""

from __future__ import annotations

import cProfile
import sys

from pgshovel.relay.cli import main as relay_main


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit("usage: python -m bench._profiled_relay OUT RELAY_YML SET")
    out = sys.argv[1]
    sys.argv = ["pgshovel-relay", *sys.argv[2:]]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        relay_main()
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
