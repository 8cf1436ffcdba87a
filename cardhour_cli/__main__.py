"""`python -m cardhour_cli` runs the same app as the `cardhour` console script."""

from cardhour_cli.main import run

run()
