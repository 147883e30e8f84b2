"""The process a validation trial runs in: `python -m jobs.trial_process <run_id>`.

Started and watched by the worker (jobs.services.validation_run_execute), so that a trial that
is cancelled can be killed outright (torch holds the CPU inside C code, where no Python check
would run) and a trial killed by the kernel (out of memory) is seen at once by its worker. The
trial writes its own progress and result; it exits when its worker process goes away."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

PARENT_POLL_S = 0.5


def _exit_when_orphaned(parent_pid: int) -> None:
    """A worker killed outright (SIGKILL, a hard time limit) cannot stop us: leave when it is gone."""
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent_pid:
            os._exit(3)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m jobs.trial_process <validation-run-id>", file=sys.stderr)
        return 2
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))  # a cancel: stop now, write nothing
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from jobs.services import validation_trial_run

    validation_trial_run(run_id=argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
