"""Settings of the load benchmark: the project's settings, with bench/bare.py as the URL root.

bench/load.py starts gunicorn with DJANGO_SETTINGS_MODULE=bench.settings_load. The bare
comparison views are mounted only here, never in config.urls.
"""

from config.settings import *  # noqa: F403  (the production settings, unchanged)

ROOT_URLCONF = "bench.bare"
