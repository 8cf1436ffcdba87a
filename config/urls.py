"""Top-level routes: /api/v1/, the OpenAPI schema and docs, the admin, /healthz."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.views import healthz

API_MODULES = [
    "accounts.api.urls",
    "inventory.api.urls",
    "contracts.api.urls",
    "leasing.api.urls",
    "leasing.api.urls_leasing",
    "billing.api.urls",
    "billing.api.urls_stripe",
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/v1/", include([path("", include(module)) for module in API_MODULES])),
]
