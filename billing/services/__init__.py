"""Write use cases of billing, one module per area (ingest, rollups, ...)."""
