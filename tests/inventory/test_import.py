"""Bulk import through the API and the management command: all or nothing, idempotent."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from inventory.models import Gpu, Node
from tests.inventory.factories import node_payload

pytestmark = pytest.mark.django_db

IMPORT = "/api/v1/nodes/import"


def rows(count: int, site: str = "Melbourne MEL1", **overrides):
    return [
        {**node_payload(hostname=f"node-{number:03d}", **overrides), "site": site}
        for number in range(count)
    ]


def as_csv(records) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(records[0]))
    writer.writeheader()
    for record in records:
        writer.writerow({k: ";".join(v) if isinstance(v, list) else v for k, v in record.items()})
    return out.getvalue()


def test_importing_hundreds_of_nodes_creates_them_with_their_gpus(provider, site, client_for):
    response = client_for(provider).post(IMPORT, rows(300), format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["created"] == 300
    assert Node.objects.count() == 300
    assert Gpu.objects.count() == 300 * 8
    assert response.json()["nodes"][0] == {
        "row": 1,
        "action": "created",
        "id": Node.objects.get(hostname="node-000").pk,
        "site": "Melbourne MEL1",
        "hostname": "node-000",
    }


def test_importing_the_same_file_twice_does_not_duplicate(provider, site, client_for):
    client = client_for(provider)
    data = rows(20)
    client.post(IMPORT, data, format="json")
    response = client.post(IMPORT, {"rows": data}, format="json")
    assert response.status_code == 200
    assert (response.json()["created"], response.json()["unchanged"]) == (0, 20)
    assert Node.objects.count() == 20 and Gpu.objects.count() == 160


def test_reimporting_changed_rows_updates_those_nodes(provider, site, client_for):
    client = client_for(provider)
    data = rows(3)
    client.post(IMPORT, data, format="json")
    data[1] = {**data[1], "gpu_count": 4, "status": "maintenance"}
    response = client.post(IMPORT, data, format="json")
    assert [n["action"] for n in response.json()["nodes"]] == ["unchanged", "updated", "unchanged"]
    node = Node.objects.get(hostname="node-001")
    assert (node.status, node.gpus.count()) == ("maintenance", 4)


def test_a_bad_row_rejects_the_whole_import_with_a_report_by_row(provider, site, client_for):
    data = rows(6)
    data[1]["gpu_model"] = "h900"
    data[2]["gpu_count"] = 0
    data[3]["salvage_value"] = "9999999.00"
    data[4]["site"] = "Nowhere"
    data[5]["hostname"] = "node-000"
    response = client_for(provider).post(IMPORT, data, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "import_rejected"
    report = [(e["row"], e["field"], e["code"]) for e in response.json()["detail"]["errors"]]
    assert report == [
        (2, "gpu_model", "unknown_gpu_model"),
        (3, "gpu_count", "gpu_count_not_positive"),
        (4, "salvage_value", "salvage_above_capex"),
        (5, "site", "unknown_site"),
        (6, "hostname", "duplicate_row"),
    ]
    assert all(e["message"] for e in response.json()["detail"]["errors"])
    assert not Node.objects.exists() and not Gpu.objects.exists()


def test_another_providers_site_is_unknown_to_the_import(provider, other_site, client_for):
    response = client_for(provider).post(IMPORT, rows(1, site=other_site.name), format="json")
    assert response.status_code == 400
    assert response.json()["detail"]["errors"][0]["code"] == "unknown_site"


def test_a_retired_node_cannot_be_reactivated_by_import(provider, site, client_for):
    client = client_for(provider)
    client.post(IMPORT, rows(1, status="retired"), format="json")
    response = client.post(IMPORT, rows(1), format="json")
    assert response.status_code == 400
    assert response.json()["detail"]["errors"][0]["code"] == "invalid_status_transition"


def test_gpu_uuids_must_match_the_count_and_be_unique(provider, site, client_for):
    data = rows(2, gpu_count=2)
    data[0]["gpu_uuids"] = ["GPU-a"]
    data[1]["gpu_uuids"] = ["GPU-b", "GPU-b"]
    response = client_for(provider).post(IMPORT, data, format="json")
    codes = [(e["row"], e["code"]) for e in response.json()["detail"]["errors"]]
    assert codes == [(1, "gpu_uuids_count_mismatch"), (2, "duplicate_gpu_uuid")]


def test_a_csv_body_imports_like_json(provider, site, client_for):
    data = rows(3, gpu_count=2)
    data[0]["gpu_uuids"] = ["GPU-x0", "GPU-x1"]
    client = client_for(provider)
    response = client.post(IMPORT, as_csv(data), content_type="text/csv")
    assert response.status_code == 200, response.json()
    assert response.json()["created"] == 3
    assert list(Node.objects.get(hostname="node-000").gpus.values_list("uuid", flat=True)) == [
        "GPU-x0",
        "GPU-x1",
    ]
    again = client.post(IMPORT, as_csv(data), content_type="text/csv")
    assert again.json()["unchanged"] == 3


def test_a_csv_file_upload_imports(provider, site, client_for):
    upload = SimpleUploadedFile("nodes.csv", as_csv(rows(2)).encode(), content_type="text/csv")
    response = client_for(provider).post(IMPORT, {"file": upload}, format="multipart")
    assert response.status_code == 200, response.json()
    assert response.json()["created"] == 2


def test_csv_rows_are_numbered_from_the_first_data_line(provider, site, client_for):
    data = rows(3)
    data[2]["capex"] = "lots"
    response = client_for(provider).post(IMPORT, as_csv(data), content_type="text/csv")
    errors = response.json()["detail"]["errors"]
    assert [(e["row"], e["field"], e["code"]) for e in errors] == [(3, "capex", "invalid")]


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        ("hostname,colour\nx,green\n", "text/csv", "unknown_columns"),
        ("", "text/csv", "empty_import"),
        ("[]", "application/json", "empty_import"),
        ('{"nodes": []}', "application/json", "malformed_import"),
        ("{not json", "application/json", "malformed_request"),
    ],
)
def test_malformed_files_are_400(provider, site, client_for, body, content_type, code):
    response = client_for(provider).post(IMPORT, body, content_type=content_type)
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_a_customer_cannot_import(customer, client_for):
    assert client_for(customer).post(IMPORT, rows(1), format="json").status_code == 403


def test_an_operator_imports_for_a_named_provider(operator, provider, site, client_for):
    client = client_for(operator)
    assert client.post(IMPORT, rows(1), format="json").status_code == 400
    response = client.post(f"{IMPORT}?organization={provider.slug}", rows(1), format="json")
    assert response.status_code == 200 and response.json()["created"] == 1


def test_the_import_honours_an_idempotency_key(provider, site, client_for):
    client = client_for(provider)
    first = client.post(IMPORT, rows(2), format="json", HTTP_IDEMPOTENCY_KEY="imp-1")
    second = client.post(IMPORT, rows(2), format="json", HTTP_IDEMPOTENCY_KEY="imp-1")
    assert first.json() == second.json() and second["Idempotent-Replayed"] == "true"


def test_the_command_imports_csv_and_json_and_is_idempotent(provider, site, tmp_path):
    csv_file = tmp_path / "nodes.csv"
    csv_file.write_text(as_csv(rows(5)))
    out = io.StringIO()
    call_command("import_nodes", str(csv_file), organization=provider.slug, stdout=out)
    assert "5 created" in out.getvalue()
    json_file = tmp_path / "nodes.json"
    json_file.write_text(json.dumps(rows(5)))
    out = io.StringIO()
    call_command("import_nodes", str(json_file), organization=provider.slug, stdout=out)
    assert "0 created, 0 updated, 5 unchanged" in out.getvalue()
    assert Node.objects.count() == 5


def test_the_command_lists_bad_rows_and_writes_nothing(provider, site, tmp_path):
    data = rows(2)
    data[1]["service_life_months"] = 0
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(data))
    err = io.StringIO()
    with pytest.raises(CommandError, match="import_rejected"):
        call_command("import_nodes", str(path), organization=provider.slug, stderr=err)
    assert "row 2: service_life_months" in err.getvalue()
    assert not Node.objects.exists()


def test_the_command_refuses_an_unknown_organization(tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text("[]")
    with pytest.raises(CommandError, match="No organization"):
        call_command("import_nodes", str(path), organization="nobody")
