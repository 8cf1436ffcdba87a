"""Top-level routes: /api/v1/, the OpenAPI schema and docs, the admin, /healthz, /metrics,
and stored documents (MEDIA_URL) for staff."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.metrics import metrics
from core.views import healthz, stored_document

# One routes module per app (its api/urls.py).
API_MODULES = [
    "accounts.api.urls",
    "inventory.api.urls",
    "contracts.api.urls",
    "leasing.api.urls",
    "billing.api.urls",
    "economics.api.urls",
    "webhooks.api.urls",
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    # Stored documents (the admin's file links), for staff; see core.views.stored_document.
    path(f"{settings.MEDIA_URL.lstrip('/')}<path:name>", stored_document, name="stored-document"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v1/", include([path("", include(module)) for module in API_MODULES])),
]

# Unrouted /api/ paths and requests Django rejects answer the API's JSON error body.
handler400 = "core.api.exceptions.bad_request"
handler404 = "core.api.exceptions.page_not_found"
handler500 = "core.api.exceptions.server_error"
