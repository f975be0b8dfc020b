"""``pgshovel-relay RELAY_YML SET``: publish a replication set's changes to Kafka."""

from __future__ import annotations

from pathlib import Path

from pgshovel import _cli
from pgshovel.relay import config
from pgshovel.relay.service import Relay


@_cli.process_command("pgshovel-relay")
def relay(options: _cli.GlobalOptions, configuration: Path, set_name: str) -> None:
    """Relay SET's PgQ batches to Kafka as Begin/Mutation/Commit messages.

    CONFIGURATION is a relay.yml (see example/relay.yml). One relay leads per
    set; others wait as standby. SIGINT/SIGTERM stop after the current batch.
    """
    relay_configuration = config.load_configuration(configuration)
    process = Relay(relay_configuration, options.cluster, set_name, options.zookeeper_hosts)
    process.install_signal_handlers()
    process.run()


def main() -> None:
    _cli.run(relay)
