"""``manage.py worker``: django-tasks-db's ``db_worker`` that first re-queues a dead worker's tasks.

Takes every option of ``db_worker`` (``--queue-name``, ``--interval``, ``--batch``,
``--max-tasks``, ``--worker-id``, …) plus ``--lease SECONDS``. A malformed task row is marked
failed with the reason and the worker goes on (``reviewconsole.background.task_row_problem``).
"""

from __future__ import annotations

import logging
import os
import random
import time
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError, close_old_connections
from django.db.utils import OperationalError
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.management.commands.db_worker import Command as DbWorker
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

from reviewconsole.background import (
    MalformedTaskRow,
    stale_tasks_requeue,
    task_row_problem,
    worker_starting,
)
from reviewconsole.health import Heartbeat, heartbeats_prune
from reviewconsole.writelock import writer_turn_wait

logger = logging.getLogger(__name__)


def sweep_interval(lease_seconds: int) -> float:
    """How often a running worker looks for tasks a dead worker left: a quarter of the lease,
    between 1 and 60 seconds."""
    return float(min(60, max(1, lease_seconds / 4)))


class ConsoleWorker(Worker):
    """db_worker's Worker, with a heartbeat (``reviewconsole.health``), malformed rows refused,
    and the tasks of a worker that died put back in the queue while it runs."""

    def __init__(self, *, lease_seconds: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heartbeat = Heartbeat(self.worker_id)
        self.lease_seconds = lease_seconds
        lease = lease_seconds if lease_seconds is not None else settings.TASK_LEASE_SECONDS
        self.sweep_every = sweep_interval(lease)
        self.swept_at = time.monotonic()

    def sweep(self, now: float | None = None) -> int:
        """Every ``sweep_every`` seconds, put back in the queue the tasks claimed longer than
        the lease ago (their worker died): they run again without waiting for a worker to
        start. Returns how many."""
        now = time.monotonic() if now is None else now
        if now - self.swept_at < self.sweep_every:
            return 0
        self.swept_at = now
        try:
            requeued = stale_tasks_requeue(lease_seconds=self.lease_seconds)
        except DatabaseError:
            logger.exception("Looking for tasks left by a stopped worker failed")
            return 0
        if requeued:
            logger.warning("Re-queued %d task(s) left running by a stopped worker", requeued)
        return requeued

    def run(self) -> None:
        # The library's loop (django_tasks_db 0.13 Worker.run), with one heartbeat per turn: the
        # library offers no hook inside its loop. The row goes when the worker stops cleanly.
        logger.info(
            "Starting worker worker_id=%s queues=%s", self.worker_id, ",".join(self.queue_names)
        )
        heartbeats_prune()
        self.heartbeat.beat(force=True)
        try:
            self._loop()
        finally:
            self.heartbeat.forget()

    def _loop(self) -> None:
        if self.startup_delay and self.interval:
            time.sleep(random.random())  # noqa: S311 - spreads workers started together
        while self.running:
            close_old_connections()
            self.heartbeat.beat()
            self.sweep()
            tasks = DBTaskResult.objects.ready().filter(backend_name=self.backend_name)
            if not self.process_all_queues:
                tasks = tasks.filter(queue_name__in=self.queue_names)
            if self.excluded_queue_names:
                tasks = tasks.exclude(queue_name__in=self.excluded_queue_names)
            with exclusive_transaction(tasks.db):
                try:
                    task_result = tasks.get_locked()
                    retrieved_task_result = True
                    if task_result is not None:
                        task_result.claim(self.worker_id)
                except OperationalError as error:
                    retrieved_task_result = False
                    if not is_locked_database_exception(error):
                        raise
                    task_result = None
            if task_result is not None:
                with self.heartbeat.during():
                    self.run_task(task_result)
                # On SQLite, leave the write lock free for a moment before claiming the next
                # task, so a command or a request waiting for it gets its turn.
                writer_turn_wait()
            if self.batch and retrieved_task_result and task_result is None:
                logger.info("No more tasks to run for worker_id=%s - exiting.", self.worker_id)
                return
            if self.max_tasks is not None and self._run_tasks >= self.max_tasks:
                logger.info("Ran %d tasks on worker=%s - exiting.", self._run_tasks, self.worker_id)
                return
            close_old_connections()
            if self.running and not task_result:
                time.sleep(self.interval)

    def run_task(self, db_task_result: DBTaskResult[Any, Any]) -> None:
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
