"""SQL shipped with pgshovel, importable as ``pgshovel._sql`` (see setup.py)."""
