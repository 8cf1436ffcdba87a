"""Write use cases of the leasing app, one module per concern; `<entity>_<verb>` names.

Callers import from the module that defines a service:

- leases: requests validated against the offer; leases from a hold, a quote or a window
- holds: holds placed and released
- changes: extension, exit, rejection, GPU replacement, preemption, ending leases that are due
- ending: status sync with the contract, allocations cut short, `lease_cut_short` (the one rule
  for a lease ending early, resold time included)
- acceptance: acceptance runs, claims and their answers on a lease's contract (the lease follows)
- allocation: placement of GPUs, hold release and expiry
- history: the lease and hold event rows and their status changes
- offers, quotes: the catalog side
"""
