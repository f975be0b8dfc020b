"""pgshovel-admin: cluster and set commands, database install, two-phase changes."""
