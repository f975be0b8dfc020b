"""Package metadata and console scripts for pgshovel.

``pip install pgshovel`` brings the admin, relay and sandbox commands; the
replication worker (``pgshovel-replicate``) needs the ``spark`` extra
(``pip install 'pgshovel[spark]'``: PySpark with pyarrow and pandas); copies in
Delta Lake and Iceberg add the ``tables`` extra (delta-rs, no JVM; pyiceberg
with its SQL catalog on SQLite or any SQLAlchemy URL: ``pgshovel[spark,tables]``).
The web console (``pgshovel-admin serve``) needs the ``console`` extra (Starlette,
uvicorn, Jinja2). ``dev`` is everything, for working on pgshovel (``make setup``).
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
# One version: pgshovel.__version__ (recorded in ZooKeeper by `cluster initialize`).
_VERSION = re.search(
    r'^__version__ = "([^"]+)"$',
    (HERE / "pgshovel" / "__init__.py").read_text(encoding="utf-8"),
    re.MULTILINE,
)
if _VERSION is None:
    raise SystemExit('setup.py: pgshovel/__init__.py has no line __version__ = "..."')
VERSION = _VERSION.group(1)

SPARK = [
    "pyspark>=4.0,<5",
    # Spark's Python data sources and the Parquet target need pyarrow and pandas (< 3).
    "pyarrow>=14",
    "pandas>=2,<3",
]

# The table formats (pgshovel/replication/tables), added to the worker's extra. One extra
# for both: the library shares its commit, recovery and maintenance code between them.
# pyiceberg is pinned to a minor version: the commit path uses its file-level API.
TABLES = ["deltalake>=1.2,<2", "pyiceberg[pyarrow,sql-sqlite]>=0.12,<0.13"]

# The web console (pgshovel/console): an ASGI app served by uvicorn, pages from Jinja2
# templates; its charts are SVG drawn by pgshovel itself (nothing fetched at run time).
CONSOLE = ["starlette>=0.37,<2", "uvicorn>=0.29", "jinja2>=3.1,<4"]

setup(
    name="pgshovel",
    version=VERSION,
    description="Change data capture for PostgreSQL: PgQ triggers, Kafka, PySpark replication",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=[*find_packages(include=["pgshovel", "pgshovel.*"]), "pgshovel._sql"],
    # The SQL lives at the top level (sql/) and ships as the package pgshovel._sql.
    package_dir={"pgshovel._sql": "sql"},
    package_data={
        "pgshovel": [
            "py.typed",
            "protocol/*.pyi",
            "console/templates/*.html",
            "replication/*.properties",
        ],
        "pgshovel._sql": ["*.sql"],
    },
    install_requires=[
        "psycopg2>=2.9,<3",
        "kazoo>=2.9,<3",
        "protobuf>=4.21,<8",
        # librdkafka 3 drops brokers older than 0.10; the sandbox runs 0.9.
        "confluent-kafka>=2.3,<3",
        # The codec prints float4 values as PostgreSQL does (pgshovel/stream/_codec_float.py).
        "numpy>=1.24",
        "pyyaml>=6",
        # The relay parses the capture trigger's JSON rows (pgshovel/relay/events.py).
        "orjson>=3.9",
        "click>=8.1",
        # Typed, frozen configuration models (relay.yml, replication.yml, set files).
        "pydantic>=2.6,<3",
        # Prometheus metrics of relay and worker.
        "prometheus_client>=0.17",
        # Backoff with jitter for transient faults.
        "tenacity>=8.2",
    ],
    extras_require={
        "spark": SPARK,
        "tables": TABLES,
        "console": CONSOLE,
        "dev": [
            *SPARK,
            *TABLES,
            *CONSOLE,
            # An independent reader of the Delta and Iceberg copies in tests (own Rust reader).
            "polars>=1.20",
            "pytest>=8",
            "pytest-timeout>=2.3",
            # the suite runs on two workers, each with its own sandbox (make test)
            "pytest-xdist>=3.5",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.10",
            "types-PyYAML",
            "types-psycopg2",
            "types-protobuf",
            # tests/unit/example/test_docker_compose.py validates against the Compose schema.
            "jsonschema>=4.18",
            "types-jsonschema",
        ],
    },
    entry_points={
        "console_scripts": [
            "pgshovel-admin=pgshovel.admin.cli:main",
            "pgshovel-relay=pgshovel.relay.cli:main",
            "pgshovel-replicate=pgshovel.replication.cli:main",
            "pgshovel-sandbox=pgshovel.sandbox.cli:main",
        ],
    },
)
