"""The sandbox's bookkeeping decisions: ports, leftover processes, PostgreSQL's location."""

from __future__ import annotations

import itertools
import stat
from pathlib import Path

from pgshovel.sandbox._plan import (
    PostgresLocation,
    ProcessState,
    choose_ports,
    classify_process,
    listening_inodes,
    parse_cmdline,
    pid_in_file,
    postgres_location,
    process_state_letter,
    processes_to_stop,
    socket_inode,
    traversable,
)

STAT_RUNNING = "4242 (java) S 1 4242 4242 0 -1 4194560 9 0 0 0"
STAT_ZOMBIE = "4242 (post gres) Z 1 4242 4242 0 -1 4194560 9 0 0 0"


def test_state_letter_survives_spaces_and_parentheses_in_the_name() -> None:
    assert process_state_letter(STAT_ZOMBIE) == "Z"
    assert process_state_letter("7 (a) b) R 1") == "R"


def test_classify_process() -> None:
    ours = ["java", "-cp", "x", "kafka.Kafka", "/s/kafka/server.properties"]
    marker = "/s/kafka/server.properties"
    assert classify_process(STAT_RUNNING, ours, marker) is ProcessState.OURS
    assert classify_process(STAT_RUNNING, ["bash"], marker) is ProcessState.FOREIGN
    assert classify_process(STAT_ZOMBIE, ours, marker) is ProcessState.GONE
    assert classify_process(None, ours, marker) is ProcessState.GONE


def test_parse_cmdline() -> None:
    assert parse_cmdline(b"postgres\0-D\0/a b\0") == ["postgres", "-D", "/a b"]


def test_only_our_live_processes_are_stopped_kafka_first() -> None:
    recorded = {"postgres": [30, 31], "zookeeper": [20], "kafka": [10, 11]}
    states = {
        30: ProcessState.OURS,
        31: ProcessState.GONE,
        20: ProcessState.OURS,
        10: ProcessState.FOREIGN,
        11: ProcessState.OURS,
    }
    assert processes_to_stop(recorded, states) == [
        ("kafka", 11),
        ("zookeeper", 20),
        ("postgres", 30),
    ]


def test_ports_are_reused_when_free_and_replaced_when_taken() -> None:
    fresh = itertools.count(40000)
    ports = choose_ports(
        {"postgres": 5433, "zookeeper": 2182, "kafka": 9093},
        is_free=lambda port: port != 2182,
        allocate=lambda: next(fresh),
    )
    assert ports == {"postgres": 5433, "zookeeper": 40000, "kafka": 9093}


def test_ports_are_distinct_even_if_the_allocator_repeats_itself() -> None:
    offers = iter([5000, 5000, 5000, 5001, 5001, 5002])
    ports = choose_ports({}, is_free=lambda _port: True, allocate=lambda: next(offers))
    assert sorted(ports.values()) == [5000, 5001, 5002]
    clash = choose_ports(
        {"postgres": 7000, "zookeeper": 7000}, lambda _p: True, iter([7001, 7002]).__next__
    )
    assert len(set(clash.values())) == 3


PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 222 1
   2: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1
"""


def test_listening_inodes_pick_the_listening_socket_of_the_port() -> None:
    assert listening_inodes(PROC_NET_TCP, 8080) == {111}
    assert listening_inodes(PROC_NET_TCP, 8081) == {333}
    assert listening_inodes(PROC_NET_TCP, 9999) == set()


def test_socket_inode() -> None:
    assert socket_inode("socket:[111]") == 111
    assert socket_inode("/dev/null") is None


def test_traversable() -> None:
    private = stat.S_IFDIR | 0o700
    assert not traversable(private, owner=0, group=0, uid=101, gids=[104])
    assert traversable(private, owner=101, group=0, uid=101, gids=[104])
    assert traversable(stat.S_IFDIR | 0o710, owner=0, group=104, uid=101, gids=[104])
    assert traversable(stat.S_IFDIR | 0o755, owner=0, group=0, uid=101, gids=[104])
    assert traversable(private, owner=5, group=5, uid=0, gids=[])


def test_postgres_stays_in_the_state_dir_when_reachable() -> None:
    location = postgres_location(Path("/work/.sandbox"), "", True, Path("/home/pg/x"))
    assert location == PostgresLocation(Path("/work/.sandbox/postgres"))
    assert location.data_dir == Path("/work/.sandbox/postgres/data")
    assert location.socket_dir == Path("/work/.sandbox/postgres/run")


def test_postgres_moves_out_when_unreachable_or_the_socket_path_is_too_long() -> None:
    fallback = Path("/var/lib/postgresql/pgshovel-sandbox/abc")
    assert postgres_location(Path("/root/.sandbox"), "", False, fallback).root == fallback
    deep = Path("/tmp/" + "d" * 90)
    assert postgres_location(deep, "", True, fallback).root == fallback


def test_a_recorded_data_dir_wins() -> None:
    location = postgres_location(Path("/s"), "/elsewhere/data", True, Path("/f"))
    assert location.data_dir == Path("/elsewhere/data")


def test_pid_in_file() -> None:
    assert pid_in_file("4242\n/var/lib/data\n1700000000\n") == 4242
    assert pid_in_file("") is None
    assert pid_in_file("garbage\n") is None
