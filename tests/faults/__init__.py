"""Fault injection: a database connection cut mid-batch, workers killed, the broker restarted."""
