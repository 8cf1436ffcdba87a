"""Routes of the accounts API."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from accounts.api.views import ApiKeyViewSet, MeView

router = SimpleRouter()
router.register("api-keys", ApiKeyViewSet, basename="api-key")

urlpatterns = [
    path("organizations/me/", MeView.as_view(), name="organization-me"),
    *router.urls,
]
