"""set verify / set resnapshot reports: one block per copy, named by its target (pure)."""

from __future__ import annotations

from urllib.parse import unquote

from pgshovel.admin.requests import differences_remain, render
from pgshovel.cluster.requests import Request, Result, TableReport, copy_key

POSTGRES = "postgresql:db.example:5432/copy"
PARQUET = "parquet:/data/copy"


def test_a_request_names_the_copies_it_asks() -> None:
    request = Request("verify", (("public", "t"),), copies=(POSTGRES, PARQUET))
    decoded = Request.decode(request.encode())
    assert decoded == request
    assert decoded.asks(PARQUET) and not decoded.asks("parquet:/elsewhere")
    # a request of an older admin names none: every worker answers it
    older = Request.decode(b'{"kind": "verify", "tables": [], "where": "", "repair": false}')
    assert older.copies == () and older.asks(PARQUET)


def test_copy_names_are_node_names() -> None:
    for name in (POSTGRES, PARQUET, "postgresql:/var/run/postgresql/db", "parquet:/a%b"):
        key = copy_key(name)
        assert "/" not in key and unquote(key) == name


def test_every_copy_reports_under_its_name() -> None:
    clean = Result("done", tables=(TableReport("public", "t", "verify", 2, 300),))
    differing = Result(
        "done",
        tables=(
            TableReport(
                "public", "t", "verify", 2, 296, differences=((1, [150], None, 15, 11, 3),)
            ),
        ),
    )
    text = render({POSTGRES: differing, PARQUET: clean, "parquet:/late": None})
    assert text.splitlines() == [
        f"copy {POSTGRES}:",
        "  status: done",
        "  public.t: verify of 2 range(s), 296 row(s)",
        "    range 1 [(150), +inf): 3 bucket(s) differ, holding 15 row(s) in the source and "
        "11 row(s) in the copy",
        f"copy {PARQUET}:",
        "  status: done",
        "  public.t: verify of 2 range(s), 300 row(s)",
        "    no difference",
        "copy parquet:/late:",
        "  no report yet (the request stays queued for its worker)",
    ]
    assert differences_remain(differing) and not differences_remain(clean)
