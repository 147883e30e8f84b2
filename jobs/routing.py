"""Which worker queue a validation of a planned row runs on (issue 14, item 1).

Each queue serves one family of devices that PyTorch runs trials on; a worker consumes the queue of the
device it has (`celery -A config worker --queues gpu` on an NVIDIA host). A row goes to the queue of its
chip's family when a worker serves it now. When none does (no GPU worker, or a chip PyTorch has no
backend for here: a TPU, an LPU, Gaudi), the user names another queue explicitly: its device then
stands in for the planned chip, and the run says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from hwcatalog.models import Chip
from jobs.models import ValidationRun, WorkerQueues

# A worker writes its queues every QUEUES_EVERY_S (jobs/worker_steps.py); three missed writes and it is gone.
QUEUES_EVERY_S = 10.0
QUEUES_STALE_AFTER_S = 35.0

Queue = ValidationRun.Queue
# What each queue's workers run trials on (the device PyTorch gives them).
QUEUE_DEVICES = {
    Queue.CPU: "a CPU (PyTorch's CPU backend)",
    Queue.GPU: "an NVIDIA GPU (CUDA)",
    Queue.ROCM: "an AMD GPU (ROCm)",
}


def queue_for_chip(chip: Chip | None) -> str | None:
    """The queue whose workers have this chip's kind of device, or None where no trial backend exists here."""
    if chip is None:
        return None
    vendor = (chip.vendor or "").strip().lower()
    if chip.kind == Chip.Kind.CPU:
        return Queue.CPU
    if chip.kind == Chip.Kind.GPU and vendor == "nvidia":
        return Queue.GPU
    if chip.kind == Chip.Kind.GPU and vendor == "amd":
        return Queue.ROCM
    return None


def live_queues(*, now=None) -> set[str]:
    """The queues some worker consumes now (its queue record is fresher than QUEUES_STALE_AFTER_S)."""
    fresh = (now or timezone.now()) - timedelta(seconds=QUEUES_STALE_AFTER_S)
    live: set[str] = set()
    for queues in WorkerQueues.objects.filter(seen_at__gte=fresh).values_list("queues", flat=True):
        live.update(q for q in queues.split(",") if q)
    return live & set(Queue.values)


@dataclass(frozen=True, kw_only=True)
class Route:
    queue: str | None  # None: refused, `reason` says why and which stand-ins there are
    stand_in: bool  # the queue's device is not the row's kind of chip
    native_queue: str | None  # the row's own family queue (None: no trial backend for it here)
    reason: str


def _family(chip: Chip | None, chip_slug: str) -> str:
    if chip is None:
        return f"{chip_slug} (no longer in the catalog)"
    return f"{chip.name} ({chip.vendor} {chip.get_kind_display()})"


def route(*, chip_slug: str, requested: str | None, live: set[str] | None = None) -> Route:
    """Where a trial of a row on `chip_slug` runs: the requested queue (a stand-in unless it is the chip's own
    family), or with none requested the chip's own family queue when a worker serves it; otherwise refused, the
    reason naming the live queues a user may choose as a stand-in."""
    chip = Chip.objects.filter(slug=chip_slug).first() if chip_slug else None
    native = queue_for_chip(chip)
    if requested:
        stand_in = requested != native
        why = f"{QUEUE_DEVICES[requested]} stands in for {_family(chip, chip_slug)}" if stand_in else "the chip's own kind of device"
        return Route(queue=requested, stand_in=stand_in, native_queue=native, reason=why)
    live = live_queues() if live is None else live
    if native is not None and native in live:
        return Route(queue=native, stand_in=False, native_queue=native, reason=f"a worker of the {native} queue ({QUEUE_DEVICES[native]}), the chip's own kind of device")
    if native is None:
        missing = f"No worker can run {_family(chip, chip_slug)}: PyTorch has no trial backend for it here"
    else:
        missing = f"No worker serves {_family(chip, chip_slug)} now (queue {native}: {QUEUE_DEVICES[native]})"
    if live:
        choices = "; ".join(f"{q} ({QUEUE_DEVICES[q]})" for q in sorted(live))
        hint = f". Choose a stand-in queue: {choices}; it runs a scaled copy on its own device and predicts for that device"
    else:
        hint = ". No worker is running on any queue: start one (the README's docker-compose section) or name a queue to wait for its worker"
    return Route(queue=None, stand_in=False, native_queue=native, reason=missing + hint + ".")


@dataclass(frozen=True, kw_only=True)
class QueueChoice:
    queue: str
    device: str  # what its workers run trials on
    live: bool  # a worker serves it now
    native: bool  # the row's chip's own kind of device (else a stand-in)


def queue_choices(*, chip_slug: str, live: set[str] | None = None) -> tuple[list[QueueChoice], Route]:
    """The queues a user may run a row's trial on, for a form (the chip's own first, then the live ones), and the
    route a request naming none would take: its queue (None when refused) and its reason."""
    live = live_queues() if live is None else live
    routed = route(chip_slug=chip_slug, requested=None, live=live)
    order = sorted(Queue.values, key=lambda q: (q != routed.native_queue, q not in live, q))
    choices = [QueueChoice(queue=q, device=QUEUE_DEVICES[q], live=q in live, native=q == routed.native_queue) for q in order]
    return choices, routed
