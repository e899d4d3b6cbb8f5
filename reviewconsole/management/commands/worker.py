"""``manage.py worker``: django-tasks-db's ``db_worker`` that first re-queues a dead worker's tasks.

Takes every option of ``db_worker`` (``--queue-name``, ``--interval``, ``--batch``,
``--max-tasks``, ``--worker-id``, …) plus ``--lease SECONDS``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django_tasks_db.management.commands.db_worker import Command as DbWorker

from reviewconsole.background import stale_tasks_requeue, worker_starting


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
        super().handle(*args, **options)
