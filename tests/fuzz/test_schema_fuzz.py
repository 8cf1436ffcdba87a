"""Schema fuzzing: every operation of the OpenAPI schema, as a provider, a customer and an operator.

schemathesis generates requests (valid and invalid) from the schema that /api/schema/ serves and
sends them over HTTP to a live server on 127.0.0.1; each answer must not be a 5xx, must use a
status code the schema documents, and must match the documented content type, headers and body.
Path parameters are drawn half from generated values and half from the ids of the demo data, so
detail endpoints answer more than 404.

`make test` runs a small, derandomized budget; `make fuzz` (FUZZ_MAX_EXAMPLES=200) a large,
random one.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation.stateful import run_state_machine_as_test

from tests.fuzz.conftest import KNOWN_IDS, ROLES, FuzzServer, key_header, spare_the_demo_keys

MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "0")) or 8
STATEFUL_STEPS = 10 if "FUZZ_MAX_EXAMPLES" in os.environ else 5
DEEP = "FUZZ_MAX_EXAMPLES" in os.environ

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=not DEEP,
    database=None,
    # Each example is an HTTP round trip to the live server and schemathesis draws large bodies
    # and filters its own strategies; none of that is a defect of the test.
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
    print_blob=True,
)

# The schema /api/schema/ serves (same generator, same renderer), built at collection time so
# that each operation is its own test; the requests go to the live server.
_raw_schema = json.loads(
    OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
)
schema = schemathesis.openapi.from_dict(
    _raw_schema,
    config=schemathesis.Config.from_dict(
        {
            "phases": {
                # The coverage phase (every boundary value of every field) sends far more than
                # MAX_EXAMPLES requests per operation: only the deep run has the time for it.
                # Requests with methods a path does not have are the `unsupported_method`
                # check's business, which this suite does not run.
                "coverage": {"enabled": DEEP, "unexpected-methods": []},
            },
        }
    ),
)


@schema.hook
def before_generate_path_parameters(context: Any, strategy: Any) -> Any:
    """Half of the path parameters are ids of real objects (any tenant's), half generated."""
    path = context.operation.path
    if path.count("{") != 1:
        # None, or a nested route's several (webhook-endpoints/{endpoint_pk}/deliveries/{id}/):
        # a draw must name every parameter, so those stay generated.
        return strategy
    name = path[path.index("{") + 1 : path.index("}")]
    field = "slug" if name == "slug" else "id"
    known = KNOWN_IDS.get((path[: path.index("{")], field))
    if not known:
        return strategy
    return st.one_of(strategy, st.sampled_from(known).map(lambda value: {name: value}))


# Body fields that name an object, and the collection whose ids (or slugs) they take.
BODY_REFERENCES = {
    "offer": ("/api/v1/offers/", "id"),
    "quote": ("/api/v1/quotes/", "id"),
    "hold": ("/api/v1/holds/", "id"),
    "gpu": ("/api/v1/gpus/", "id"),
    "node": ("/api/v1/nodes/", "id"),
    "site": ("/api/v1/sites/", "id"),
    "contract": ("/api/v1/contracts/", "id"),
    "gpu_model": ("/api/v1/gpu-models/", "slug"),
}
ORGANIZATION_FIELDS = {"lessor", "lessee", "provider"}


@schema.hook
def map_body(context: Any, body: Any) -> Any:
    """About half of the fields that name an object name a real one, so writes get past 404."""
    if not isinstance(body, dict):
        return body
    body = dict(body)
    for name, value in body.items():
        if name in ORGANIZATION_FIELDS:
            known: list[Any] = list(ROLES.values())
        elif name in BODY_REFERENCES:
            known = KNOWN_IDS.get(BODY_REFERENCES[name], [])
        else:
            continue
        seed = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str):
            seed = len(value)
        if known and seed is not None and seed % 2 == 0:
            body[name] = known[(seed // 2) % len(known)]
    return body


# django_db: so that the test database is created; the requests themselves run in the server
# thread, on the data `fuzz_server` committed.
@pytest.mark.fuzz
@pytest.mark.django_db
@pytest.mark.parametrize("role", list(ROLES))
@FUZZ_SETTINGS
@schema.parametrize()
def test_every_operation_answers_as_its_schema_documents(
    case: Any, role: str, fuzz_server: FuzzServer
):
    spare_the_demo_keys(case)
    response = case.call_and_validate(
        base_url=fuzz_server.base_url, headers=key_header(role), checks=CHECKS
    )
    assert response.status_code != 401, "the demo key stopped working: the run tests nothing"


STATEFUL_SETTINGS = settings(
    FUZZ_SETTINGS,
    max_examples=MAX_EXAMPLES,
    stateful_step_count=STATEFUL_STEPS,
    # No shrinking: a scenario is drawn from the answers of a server whose data the scenarios
    # change, so a replay does not draw the same scenario again.
    phases=[Phase.explicit, Phase.generate],
)


@pytest.mark.fuzz
@pytest.mark.django_db
@pytest.mark.parametrize("role", list(ROLES))
def test_linked_operations_answer_as_the_schema_documents(role: str, fuzz_server: FuzzServer):
    """Stateful: chains such as create -> get -> patch -> delete, along the links schemathesis
    infers from the schema (drf-spectacular emits none), with the ids the answers carry."""

    failures: list[Exception] = []

    class Machine(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            spare_the_demo_keys(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": fuzz_server.base_url, "headers": key_header(role)}

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            try:
                case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)
                assert response.status_code != 401, "the demo key stopped working"
            except Exception as failure:
                failures.append(failure)
                raise

    try:
        run_state_machine_as_test(Machine, settings=STATEFUL_SETTINGS)
    except Flaky:
        # Hypothesis notices that a scenario starting like an earlier one drew differently (the
        # answers it draws from changed): that is the server's data moving on, not a failure.
        # A check that failed on the way is the finding; without one the run is clean, as in
        # schemathesis's own stateful runner.
        if failures:
            raise failures[0] from None
