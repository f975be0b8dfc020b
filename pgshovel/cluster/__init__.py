"""The cluster's configuration model: names, set files, versions, ZooKeeper reads."""

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.sets import load_set_configuration, read_set, to_document
from pgshovel.cluster.versions import set_version

__all__ = ["load_set_configuration", "mask_dsn", "read_set", "set_version", "to_document"]
