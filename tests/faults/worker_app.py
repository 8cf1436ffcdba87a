"""The project's Celery app, with broker transport options a fault test sets for its worker.

`celery -A tests.faults.worker_app worker` runs the same tasks and settings as
`celery -A config worker`; FAULTS_BROKER_TRANSPORT_OPTIONS (JSON) replaces the transport
options, e.g. a visibility timeout of seconds instead of Redis's hour.
"""

from __future__ import annotations

import json
import os

from config.celery import app

_options = os.environ.get("FAULTS_BROKER_TRANSPORT_OPTIONS")
if _options:
    app.conf.broker_transport_options = json.loads(_options)

__all__ = ["app"]
