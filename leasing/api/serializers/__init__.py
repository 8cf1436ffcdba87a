"""Serializers of the leasing API, by concern: `catalog` (offers, SLA offerings, capacity search,
quotes), `leases` (holds, leases, allocations, acceptance runs, a lease's history) and `sizing`
(the sizing question and answer)."""
