"""Reads of economics: GPU-hours per node and bucket, revenue attribution, unit economics."""
