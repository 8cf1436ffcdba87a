"""Write use cases of economics, one module per area (assets, signals, runs, fx)."""
