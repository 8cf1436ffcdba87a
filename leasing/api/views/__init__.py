"""Views of the leasing API, by concern: `catalog` (offers, SLA offerings, capacity search,
quotes), `leases` (holds, leases, acceptance runs, a lease's history) and `sizing` (which GPUs
hold a workload, and what they cost now)."""
