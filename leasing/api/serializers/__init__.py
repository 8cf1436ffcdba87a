"""Serializers of the leasing API, by concern: `catalog` (offers, SLA offerings, capacity search,
quotes) and `leases` (holds, leases, allocations, acceptance runs, a lease's history)."""
