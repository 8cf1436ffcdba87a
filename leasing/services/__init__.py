"""Write use cases of the leasing app, one module per concern; `<entity>_<verb>` names.

Callers import from the module that defines a service:

- leases: requests validated against the offer; leases from a hold, a quote or a window
- holds: holds placed and released
- changes: status sync with the contract, extension, exit, rejection, GPU replacement,
  preemption, ending leases that are due
- acceptance: acceptance runs, claims and their answers on a lease's contract (the lease follows)
- allocation: placement of GPUs, hold release and expiry
- history: the lease and hold event rows and their status changes
- offers, quotes: the catalog side
"""
