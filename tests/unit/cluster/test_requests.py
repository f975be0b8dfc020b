"""Request and result nodes: what a node that is not a request (or result) is refused with."""

from __future__ import annotations

import pytest

from pgshovel.cluster.requests import Request, Result, TableReport
from pgshovel.errors import ConfigurationError


def test_a_request_round_trips() -> None:
    request = Request("resnapshot", (("public", "t"), ("a b", "C")), "id > 1", repair=False)
    assert Request.decode(request.encode()) == request
    assert Request.decode(b'{"kind": "verify"}') == Request("verify")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not json", "holds no JSON"),
        (b"\xff\xfe", "holds no JSON"),
        (b"[1, 2]", "holds list, not an object"),
        (b'{"kind": "drop"}', "kind 'drop' is neither"),
        (b"{}", "kind None is neither"),
        (b'{"kind": "verify", "tables": [["public"]]}', "are not [schema, table] pairs"),
        (b'{"kind": "verify", "tables": "t"}', "are not [schema, table] pairs"),
        (b'{"kind": "verify", "tables": [["public", 3]]}', "are not [schema, table] pairs"),
        (b'{"kind": "resnapshot", "where": 1}', "where 1 is not text"),
        (b'{"kind": "verify", "repair": "yes"}', "repair 'yes' is not true/false"),
    ],
)
def test_a_node_that_holds_no_request_says_why(data: bytes, reason: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Request.decode(data)
    assert reason in str(refused.value)


def test_a_result_round_trips_and_a_bad_one_is_an_error() -> None:
    result = Result(
        "done", "", (TableReport("public", "t", "verify", 2, 10, ((0, None, ["5"], 3, 2, 1),)),)
    )
    decoded = Result.decode(result.encode())
    assert decoded.status == "done" and decoded.tables[0].rows == 10
    for data in (b"", b"{}", b'{"status": "maybe"}', b'{"status": "done", "tables": [1]}'):
        with pytest.raises(ConfigurationError, match="it holds no result"):
            Result.decode(data)
