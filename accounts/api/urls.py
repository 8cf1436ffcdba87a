"""Routes of the accounts API."""

from django.urls import path

from accounts.api.views import ApiKeyViewSet, MeView
from core.api.routers import Router

router = Router()
router.register("api-keys", ApiKeyViewSet, basename="api-key")

urlpatterns = [
    path("organizations/me/", MeView.as_view(), name="organization-me"),
    *router.urls,
]
