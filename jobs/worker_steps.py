"""A worker bootstep: every QUEUES_EVERY_S the worker writes which queues it consumes, so a validation is
routed to a queue some live worker serves (jobs/routing.py). It runs on the worker's own timer, in the
main worker process, whatever its tasks are doing."""
from __future__ import annotations

import logging

from celery import bootsteps

logger = logging.getLogger(__name__)


def consumed_queues(app) -> list[str]:
    """The queues this worker process reads (`--queues`; every configured queue when none was named)."""
    queues = app.amqp.queues
    return sorted(queues.consume_from or queues)


class QueueHeartbeat(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.entry = None

    def start(self, worker) -> None:
        from jobs.routing import QUEUES_EVERY_S

        self._write(worker)
        self.entry = worker.timer.call_repeatedly(QUEUES_EVERY_S, self._write, (worker,), priority=10)

    def stop(self, worker) -> None:
        if self.entry is not None:
            self.entry.cancel()
            self.entry = None

    def _write(self, worker) -> None:
        from django.db import close_old_connections

        from jobs.services import worker_queues_record

        try:
            worker_queues_record(hostname=worker.hostname or "unknown", queues=consumed_queues(worker.app))
        except Exception:  # noqa: BLE001 - a database that is down now is tried again on the next tick
            logger.warning("could not record this worker's queues", exc_info=True)
        finally:
            close_old_connections()
