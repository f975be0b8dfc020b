"""What a set has, read: what runs for it and what is installed in its database.

``activity``: the relay election, the queue's backlog, the workers.
``catalog``: settings, extensions, the set's queue and triggers.
Only reads. Used by ``pgshovel-admin`` (planning, ``set inspect``, requests)
and by the read-only console, which therefore need not import each other.
"""
