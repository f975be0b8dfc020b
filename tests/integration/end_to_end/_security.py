"""Helpers of the security tests: credentials, least-privilege roles, and the ZooKeeper walk.

Every process of a test gets ZooKeeper credentials through its environment
(``PGSHOVEL_ZOOKEEPER_AUTH``), as an operator would set them. Roles are
PostgreSQL-wide, so each test creates its own, with passwords kept in
passfiles under the test's directory (the sandbox trusts local logins, so the
passwords only have to be carried, never checked), and drops them afterwards.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.security import ACL, Id, Permissions, make_digest_acl_credential
from psycopg2 import sql

from pgshovel.cluster import security
from pgshovel.sandbox import SandboxConnection
from tests.integration.admin._admin import ADMIN

ZOOKEEPER_USER = "pgshovel-test"


@dataclass(frozen=True)
class Credentials:
    """The ZooKeeper password of a test and the value of ``PGSHOVEL_ZOOKEEPER_AUTH``."""

    password: str = field(default_factory=lambda: "zk-" + uuid.uuid4().hex)

    @property
    def auth(self) -> str:
        return f"digest:{ZOOKEEPER_USER}:{self.password}"

    def client(self, hosts: str) -> KazooClient:
        client = KazooClient(
            hosts=hosts, auth_data=[("digest", f"{ZOOKEEPER_USER}:{self.password}")]
        )
        client.start(timeout=15.0)
        return client

    @property
    def acl(self) -> list[ACL]:
        """Creator-only: every permission for this test's digest user, nothing for others."""
        credential = make_digest_acl_credential(ZOOKEEPER_USER, self.password)
        return [ACL(Permissions.ALL, Id("digest", credential))]


@dataclass
class Role:
    """A login role with a password in its own passfile."""

    name: str
    password: str
    passfile: Path

    def source_connection(self) -> str:
        return f"user={self.name} passfile={self.passfile}"


class Roles:
    """Roles created for one test; ``drop`` removes them and their privileges everywhere."""

    def __init__(self, sandbox: SandboxConnection, directory: Path) -> None:
        self.sandbox = sandbox
        self.directory = directory
        self.created: list[Role] = []
        self.databases: list[str] = []

    def create(self, hint: str) -> Role:
        role = Role(
            f"pgshovel_{hint}_{uuid.uuid4().hex[:8]}",
            f"{hint}-{uuid.uuid4().hex}",
            self.directory / f"{hint}.pgpass",
        )
        self.passfile(role)
        run_sql(
            self.sandbox.postgres_dsn,
            [
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role.name), sql.Literal(role.password)
                )
            ],
        )
        self.created.append(role)
        return role

    @staticmethod
    def passfile(role: Role) -> None:
        role.passfile.write_text(f"*:*:*:{role.name}:{role.password}\n")
        role.passfile.chmod(0o600)

    def drop(self) -> None:
        for role in self.created:
            name = sql.Identifier(role.name)
            run_sql(
                self.sandbox.postgres_dsn,
                [
                    sql.SQL(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = {}"
                    ).format(sql.Literal(role.name))
                ],
            )
            for dsn in self.databases:
                try:
                    run_sql(
                        dsn,
                        [
                            sql.SQL("REASSIGN OWNED BY {} TO postgres").format(name),
                            sql.SQL("DROP OWNED BY {}").format(name),
                        ],
                    )
                except psycopg2.OperationalError:
                    pass  # the database is gone already
            run_sql(self.sandbox.postgres_dsn, [sql.SQL("DROP ROLE IF EXISTS {}").format(name)])


def run_sql(dsn: str, statements: Iterable[sql.Composable | str]) -> None:
    """Run statements on ``dsn`` (as the role it names), each in autocommit."""
    connection = psycopg2.connect(dsn)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    finally:
        connection.close()


def run_admin(
    sandbox: SandboxConnection,
    cluster: str,
    *args: str | Path,
    environment: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """pgshovel-admin with this process's environment, changed by ``environment`` (None: unset)."""
    env = dict(
        os.environ, PGSHOVEL_CLUSTER=cluster, PGSHOVEL_ZOOKEEPER_HOSTS=sandbox.zookeeper_hosts
    )
    for key, value in (environment or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [str(ADMIN), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


WITHOUT_CREDENTIALS: dict[str, str | None] = {
    security.AUTH_VARIABLE: None,
    security.AUTH_FILE_VARIABLE: None,
}


def walk(client: KazooClient, root: str) -> Iterator[str]:
    """Every node under ``root`` (itself included), parents first."""
    yield root
    try:
        children = sorted(client.get_children(root))
    except NoNodeError:  # an ephemeral lock node that just went away
        return
    for child in children:
        yield from walk(client, f"{root}/{child}")


def check_protected(
    hosts: str, credentials: Credentials, root: str, secrets: Iterable[str]
) -> list[str]:
    """Assert every node under ``root`` is creator-only and holds no secret; the nodes checked."""
    authorized = credentials.client(hosts)
    anonymous = KazooClient(hosts=hosts)
    anonymous.start(timeout=15.0)
    wrong = Credentials("not-" + credentials.password).client(hosts)
    checked = []
    try:
        for path in list(walk(authorized, root)):
            try:
                data, _ = authorized.get(path)
                acl, _ = authorized.get_acls(path)
            except NoNodeError:
                continue
            assert acl == credentials.acl, (path, acl)
            for secret in secrets:
                assert secret.encode() not in data, f"{path} holds a secret"
            for client in (anonymous, wrong):
                for read in (client.get, client.get_children):
                    try:
                        read(path)
                    except NoAuthError:
                        continue
                    except NoNodeError:
                        break
                    raise AssertionError(f"{path} was readable without the credentials")
            checked.append(path)
    finally:
        for client in (authorized, anonymous, wrong):
            client.stop()
            client.close()
    return checked
