"""Routes of the accounts API."""

from django.urls import path

from accounts.api.views import ApiKeyViewSet, BillingProfileView, MeView
from core.api.routers import Router

router = Router()
router.register("api-keys", ApiKeyViewSet, basename="api-key")

urlpatterns = [
    path("organizations/me/", MeView.as_view(), name="organization-me"),
    path(
        "organizations/me/billing-profile/",
        BillingProfileView.as_view(),
        name="organization-billing-profile",
    ),
    *router.urls,
]
