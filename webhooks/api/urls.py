"""Routes of the webhooks API: endpoints and their deliveries."""

from core.api.routers import Router
from webhooks.api.views import DeliveryViewSet, WebhookEndpointViewSet

router = Router()
router.register("webhook-endpoints", WebhookEndpointViewSet, basename="webhook-endpoint")
router.register(
    r"webhook-endpoints/(?P<endpoint_pk>[^/.]+)/deliveries",
    DeliveryViewSet,
    basename="webhook-delivery",
)

urlpatterns = router.urls
