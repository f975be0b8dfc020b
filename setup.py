"""Package metadata and console scripts for pgshovel."""

from setuptools import find_packages, setup

setup(
    name="pgshovel",
    version="0.1.0",
    description="Change data capture for PostgreSQL: PgQ triggers, Kafka, PySpark replication",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=[*find_packages(include=["pgshovel", "pgshovel.*"]), "pgshovel._sql"],
    # The SQL lives at the top level (sql/) and ships as the package pgshovel._sql.
    package_dir={"pgshovel._sql": "sql"},
    package_data={"pgshovel": ["py.typed", "protocol/*.pyi"], "pgshovel._sql": ["*.sql"]},
    install_requires=[
        "psycopg2>=2.9,<3",
        "kazoo>=2.9,<3",
        "protobuf>=4.21,<8",
        # librdkafka 3 drops brokers older than 0.10; the sandbox runs 0.9.
        "confluent-kafka>=2.3,<3",
        "pyspark>=4.0,<5",
        # Spark's Python data sources need pyarrow and pandas (< 3).
        "pyarrow>=14",
        "pandas>=2,<3",
        "pyyaml>=6",
        "click>=8.1",
        # Typed, frozen configuration models (relay.yml, replication.yml, set files).
        "pydantic>=2.6,<3",
        # Prometheus metrics of relay and worker.
        "prometheus_client>=0.17",
        # Backoff with jitter for transient faults.
        "tenacity>=8.2",
    ],
    extras_require={
        "dev": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "mypy>=1.10",
            "types-PyYAML",
            "types-psycopg2",
            "types-protobuf",
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
