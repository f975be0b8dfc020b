"""``pgshovel-relay RELAY_YML SET``: publish a replication set's changes to Kafka."""

from __future__ import annotations

from pathlib import Path

import click

from pgshovel import _cli
from pgshovel.relay import config
from pgshovel.relay.service import Relay


@click.command(name="pgshovel-relay")
@_cli.global_options
@click.argument("configuration", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("set_name", metavar="SET")
def relay(
    cluster: str,
    zookeeper_hosts: str,
    log_level: str,
    debug: bool,
    configuration: Path,
    set_name: str,
) -> None:
    """Relay SET's PgQ batches to Kafka as Begin/Mutation/Commit messages.

    CONFIGURATION is a relay.yml (see example/relay.yml). One relay leads per
    set; others wait as standby. SIGINT/SIGTERM stop after the current batch.
    """
    options = _cli.make_global_options(cluster, zookeeper_hosts, log_level, debug)
    relay_configuration = config.load(configuration)
    process = Relay(relay_configuration, options.cluster, set_name, options.zookeeper_hosts)
    process.install_signal_handlers()
    process.run()


def main() -> None:
    _cli.run(relay)
