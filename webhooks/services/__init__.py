"""Write use cases of the webhooks app: endpoints, the outbox's fan-out, deliveries."""
