"""The node import's limits: bytes before reading, rows while reading, cells of any size.

The "before reading it all" and "stop at the first row past the cap" tests talk raw HTTP to a
live server and send less body than they declare: a server that waited for the whole body
would never answer them.
"""

from __future__ import annotations

import io
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from accounts.services import api_key_create
from inventory.models import Gpu, Node
from inventory.services.import_files import MAX_CELL_CHARS, MAX_ROWS
from tests.inventory.test_import import IMPORT, as_csv, rows

pytestmark = pytest.mark.django_db
# The live server answers on its own connection: its tests commit (and restore the catalog).
TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def raw_post(base_url: str, path: str, *, headers: dict[str, str], body_part: bytes) -> bytes:
    """Send a POST's headers and only `body_part` of its body; return what the server answers."""
    url = urlsplit(base_url)
    head = [f"POST {path} HTTP/1.1", f"Host: {url.hostname}:{url.port}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection((url.hostname, url.port), timeout=20) as conn:
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body_part)
        answer = b""
        while b"\r\n\r\n" not in answer or not _complete(answer):
            chunk = conn.recv(65536)  # a server still reading the body times out here
            if not chunk:
                break
            answer += chunk
    return answer


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _status_and_body(answer: bytes) -> tuple[int, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


@pytest.fixture
def live_key(live_server: Any, provider: Any) -> str:
    return api_key_create(organization=provider, name="live", scope="write").raw_key


@TRANSACTIONAL
def test_a_body_declared_past_the_cap_is_refused_before_it_is_read(live_server, live_key):
    answer = raw_post(
        live_server.url,
        IMPORT,
        headers={
            "Authorization": f"Api-Key {live_key}",
            "Content-Type": "application/json",
            "Content-Length": str(50 * 1024 * 1024),
        },
        body_part=b'[{"hostname": "a"},' * 50,
    )
    status, body = _status_and_body(answer)
    assert status == 413
    assert body["code"] == "payload_too_large"
    assert body["detail"] == {"max_bytes": 10 * 1024 * 1024}
    assert not Node.objects.exists()


@TRANSACTIONAL
@pytest.mark.parametrize("file_format", ["json", "csv"])
def test_reading_stops_at_the_first_row_past_the_cap(live_server, live_key, file_format):
    # MAX_ROWS + 1 rows and 20,000 more (about 300 KB: the readers fill 64 KB buffers), then
    # the client stalls with most of the declared body unsent.
    count = MAX_ROWS + 20_000
    if file_format == "json":
        content_type = "application/json"
        part = b"[" + b",".join(b'{"hostname": "n%d"}' % n for n in range(count)) + b","
    else:
        content_type = "text/csv"
        part = b"hostname\n" + b"".join(b"n%d\n" % n for n in range(count))
    answer = raw_post(
        live_server.url,
        IMPORT,
        headers={
            "Authorization": f"Api-Key {live_key}",
            "Content-Type": content_type,
            # Declared within the byte cap, but only the first MAX_ROWS + 1 rows ever arrive.
            "Content-Length": str(9 * 1024 * 1024),
        },
        body_part=part,
    )
    status, body = _status_and_body(answer)
    assert status == 400
    assert body["code"] == "too_many_rows"
    assert body["detail"]["max_rows"] == MAX_ROWS
    assert not Node.objects.exists()


def test_the_byte_cap_is_a_setting_and_holds_for_uploads(provider, site, client_for, settings):
    settings.NODE_IMPORT_MAX_BYTES = 2_000
    client = client_for(provider)
    big = as_csv(rows(20))
    assert len(big) > 2_000
    for response in (
        client.post(IMPORT, big, content_type="text/csv"),
        client.post(IMPORT, rows(20), format="json"),
        client.post(
            IMPORT,
            {"file": SimpleUploadedFile("nodes.csv", big.encode(), content_type="text/csv")},
            format="multipart",
        ),
    ):
        assert response.status_code == 413, response.json()
        assert response.json()["code"] == "payload_too_large"
    assert client.post(IMPORT, rows(1), format="json").status_code == 200
    assert Node.objects.count() == 1


@pytest.mark.parametrize("size", [MAX_CELL_CHARS + 1, 3 * 1024 * 1024])
def test_an_oversized_csv_cell_is_a_400_naming_its_row(provider, site, client_for, size):
    data = rows(3)
    data[1]["serial"] = "x" * size
    response = client_for(provider).post(IMPORT, as_csv(data), content_type="text/csv")
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["code"] == "cell_too_large"
    assert body["detail"]["errors"][0]["row"] == 2
    assert len(response.content) < 2_000  # the cell is not echoed back
    assert not Node.objects.exists() and not Gpu.objects.exists()


def test_an_oversized_json_cell_is_a_400_naming_its_row(provider, site, client_for):
    data = rows(3)
    data[2]["hostname"] = "h" * (3 * 1024 * 1024)
    response = client_for(provider).post(IMPORT, data, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "cell_too_large"
    assert response.json()["detail"]["errors"][0]["row"] == 3
    assert not Node.objects.exists()


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        ('{"rows": [], "more": 1}', "application/json", "malformed_import"),
        ('{"rows": {}}', "application/json", "malformed_import"),
        ('"rows"', "application/json", "malformed_import"),
        ('[{"hostname": "a"}] [', "application/json", "malformed_request"),
        ('[{"a": ' * 40 + "1" + "}]" * 40, "application/json", "malformed_request"),
        ('hostname\n"unterminated', "text/csv", "import_rejected"),
    ],
)
def test_odd_bodies_are_400s_with_a_code(provider, site, client_for, body, content_type, code):
    response = client_for(provider).post(IMPORT, body, content_type=content_type)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["code"] == code


def test_a_byte_order_mark_is_allowed_in_json_and_csv(provider, site, client_for):
    client = client_for(provider)
    bom = "\ufeff"
    response = client.post(IMPORT, bom + json.dumps(rows(1)), content_type="application/json")
    assert response.status_code == 200, response.json()
    response = client.post(IMPORT, bom + as_csv(rows(1)), content_type="text/csv")
    assert response.status_code == 200 and response.json()["unchanged"] == 1


def test_the_command_has_the_same_limits(provider, site, tmp_path, settings):
    many = tmp_path / "many.csv"
    many.write_text("hostname\n" + "".join(f"n{n}\n" for n in range(MAX_ROWS + 1)))
    with pytest.raises(CommandError, match="too_many_rows"):
        call_command("import_nodes", str(many), organization=provider.slug, stderr=io.StringIO())

    settings.NODE_IMPORT_MAX_BYTES = 1_000
    big = tmp_path / "big.json"
    big.write_text(json.dumps(rows(10)))
    with pytest.raises(CommandError, match="payload_too_large"):
        call_command("import_nodes", str(big), organization=provider.slug, stderr=io.StringIO())

    settings.NODE_IMPORT_MAX_BYTES = 10 * 1024 * 1024
    cell = tmp_path / "cell.csv"
    data = rows(2)
    data[0]["serial"] = "x" * 200_000
    cell.write_text(as_csv(data))
    err = io.StringIO()
    with pytest.raises(CommandError, match="cell_too_large"):
        call_command("import_nodes", str(cell), organization=provider.slug, stderr=err)
    assert "row 1" in err.getvalue()
    assert not Node.objects.exists()
