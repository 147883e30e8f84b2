"""A worker bootstep: every QUEUES_EVERY_S the worker writes which queues it serves, so a validation is routed
to a queue some live worker serves (jobs/routing.py). It runs on the worker's own timer, in the main worker
process, whatever its tasks are doing; a worker that stops removes its record."""
from __future__ import annotations

import json
import logging
import subprocess
import sys

from celery import bootsteps

logger = logging.getLogger(__name__)

DEVICE_QUEUES = ("gpu", "rocm")  # queues that need a GPU torch can drive (jobs/routing.py QUEUE_DEVICES)
# Run in a child process: the worker's own process never imports torch (only its trial processes do).
_TORCH_DEVICE = "import json, torch; print(json.dumps({'cuda': torch.cuda.is_available(), 'hip': torch.version.hip}))"


def consumed_queues(app) -> list[str]:
    """The queues this worker process reads (`--queues`; every configured queue when none was named)."""
    queues = app.amqp.queues
    return sorted(queues.consume_from or queues)


def servable(queues: list[str], *, torch_device: dict | None) -> list[str]:
    """The queues a worker can run trials for: `gpu` only where torch drives an NVIDIA GPU (CUDA), `rocm` only
    where it drives an AMD one (a ROCm build); every other queue as consumed. `torch_device` is what
    _TORCH_DEVICE printed, None when it could not run."""
    cuda = bool(torch_device and torch_device.get("cuda"))
    hip = bool(torch_device and torch_device.get("hip"))
    can = {"gpu": cuda and not hip, "rocm": cuda and hip}
    return [q for q in queues if can.get(q, True)]


def _torch_device() -> dict | None:
    try:
        done = subprocess.run([sys.executable, "-c", _TORCH_DEVICE], capture_output=True, text=True, timeout=120, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        logger.warning("could not ask torch which GPU this worker has", exc_info=True)
        return None


class QueueHeartbeat(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.entry = None
        self.queues: list[str] = []

    def start(self, worker) -> None:
        from jobs.routing import QUEUES_EVERY_S

        consumed = consumed_queues(worker.app)
        device = _torch_device() if any(q in DEVICE_QUEUES for q in consumed) else None
        self.queues = servable(consumed, torch_device=device)
        for queue in sorted(set(consumed) - set(self.queues)):
            logger.warning("this worker consumes queue %s but torch here has no such GPU: validations are not routed to it", queue)
        self._write(worker)
        self.entry = worker.timer.call_repeatedly(QUEUES_EVERY_S, self._write, (worker,), priority=10)

    def stop(self, worker) -> None:
        if self.entry is not None:
            self.entry.cancel()
            self.entry = None
        from jobs.services import worker_queues_forget

        try:
            worker_queues_forget(hostname=worker.hostname or "unknown")
        except Exception:  # noqa: BLE001 - a database that is down: the record goes stale in QUEUES_STALE_AFTER_S instead
            logger.warning("could not remove this worker's queues", exc_info=True)

    def _write(self, worker) -> None:
        from django.db import close_old_connections

        from jobs.services import worker_queues_record

        try:
            worker_queues_record(hostname=worker.hostname or "unknown", queues=self.queues)
        except Exception:  # noqa: BLE001 - a database that is down now is tried again on the next tick
            logger.warning("could not record this worker's queues", exc_info=True)
        finally:
            close_old_connections()
