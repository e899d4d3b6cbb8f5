"""``manage.py worker``: django-tasks-db's ``db_worker`` that first re-queues a dead worker's tasks.

Takes every option of ``db_worker`` (``--queue-name``, ``--interval``, ``--batch``,
``--max-tasks``, ``--worker-id``, …) plus ``--lease SECONDS``. A malformed task row is marked
failed with the reason and the worker goes on (``reviewconsole.background.task_row_problem``).
"""

from __future__ import annotations

import logging
import os
import threading
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError, close_old_connections, connection
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.management.commands.db_worker import Command as DbWorker
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from reviewconsole.background import (
    MalformedTaskRow,
    stale_tasks_requeue,
    task_row_problem,
    worker_starting,
)

logger = logging.getLogger(__name__)


def sweep_interval(lease_seconds: int) -> float:
    """How often a running worker looks for tasks a dead worker left: a quarter of the lease,
    between 1 and 60 seconds."""
    return float(min(60, max(1, lease_seconds / 4)))


class ConsoleWorker(Worker):
    def __init__(self, *args: Any, lease_seconds: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lease_seconds = lease_seconds

    def run(self) -> None:
        # Beside the loop that takes tasks, a thread puts back in the queue the tasks of a worker
        # that died (claimed longer than the lease ago), so they run again without waiting for a
        # worker to start.
        stop = threading.Event()
        sweeper = threading.Thread(
            target=self.sweep_until, args=(stop,), name="lease-sweep", daemon=True
        )
        sweeper.start()
        try:
            super().run()
        finally:
            stop.set()
            sweeper.join()

    def sweep_until(self, stop: threading.Event) -> None:
        lease = self.lease_seconds
        every = sweep_interval(lease if lease is not None else settings.TASK_LEASE_SECONDS)
        try:
            while not stop.wait(every):
                close_old_connections()
                try:
                    requeued = stale_tasks_requeue(lease_seconds=lease)
                except DatabaseError:
                    logger.exception("Looking for tasks left by a stopped worker failed")
                    continue
                if requeued:
                    logger.warning(
                        "Re-queued %d task(s) left running by a stopped worker", requeued
                    )
        finally:
            connection.close()

    def run_task(self, db_task_result: DBTaskResult) -> None:
        problem = task_row_problem(db_task_result)
        if problem is None:
            super().run_task(db_task_result)
            return
        logger.error("Task id=%s not run: %s", db_task_result.id, problem)
        db_task_result.set_failed(MalformedTaskRow(problem))
        self._run_tasks += 1


class Command(DbWorker):
    help = "Run background tasks; tasks left running by a worker that died are queued again first."

    def add_arguments(self, parser: ArgumentParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--lease",
            type=int,
            default=None,
            metavar="SECONDS",
            help="re-queue tasks running longer than this (default: TASK_LEASE_SECONDS)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        lease = options.pop("lease")
        requeued = stale_tasks_requeue(lease_seconds=lease)
        if requeued:
            self.stdout.write(f"re-queued {requeued} task(s) left running by a stopped worker")
        worker_starting()
        self._run(lease_seconds=lease, **options)

    def _run(
        self,
        *,
        verbosity: int,
        queue_name: str,
        interval: float,
        batch: bool,
        backend_name: str,
        startup_delay: bool,
        reload: bool,
        max_tasks: int | None,
        worker_id: str,
        exclude_queues: str,
        lease_seconds: int | None = None,
        **options: Any,
    ) -> None:
        # db_worker's own handle, building a ConsoleWorker: the library builds its Worker inside
        # handle and offers no hook to choose the class.
        self.configure_logging(verbosity)
        if reload and batch:
            logger.warning("--reload and --batch cannot be specified together; not reloading.")
            reload = False
        queue_names = queue_name.split(",")
        excluded_queue_names = exclude_queues.split(",") if exclude_queues else []
        if excluded_queue_names and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = ConsoleWorker(
            queue_names=queue_names,
            interval=interval,
            batch=batch,
            backend_name=backend_name,
            startup_delay=startup_delay,
            max_tasks=max_tasks,
            worker_id=worker_id,
            excluded_queue_names=excluded_queue_names,
            lease_seconds=lease_seconds,
        )
        if reload:
            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()
            run_with_reloader(worker.run)
        else:
            worker.configure_signals()
            worker.run()
