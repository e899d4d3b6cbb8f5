"""A second instance of the console, in a process of its own, for tests of what instances share.

    DATABASE_URL=… [PROBE_NOW=ISO-8601] python -m tests.instance_probe

sets Django up against the database ``DATABASE_URL`` names (the test's own), prints ``ready``
and then answers one request per line of its standard input, through the whole request stack
(every middleware, the URL router, the views, the API), with one client whose cookies persist:

    {"method": "get" | "post", "path": "/…", "json": {…}?, "data": {…}?, "headers": {…}?}

Each answer is one line: ``{"status", "headers", "json" | "text"}``. Its caches, its
connections and its memory are its own, as another web instance's are: what it answers after
the test process wrote something shows what another instance would answer. ``PROBE_NOW`` fixes
its clock (``reviewconsole.clock``) at the instant the test's own clock is frozen at.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import Any

READY = "ready"


def answer(response: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"status": response.status_code, "headers": dict(response.headers)}
    if response.get("Content-Type", "").startswith("application/json"):
        found["json"] = json.loads(response.content)
    else:
        found["text"] = response.content.decode(errors="replace")[:2000]
    return found


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.test import Client

    from reviewconsole import clock

    at = os.environ.get("PROBE_NOW")
    if at:
        moment = datetime.fromisoformat(at)
        clock.now = lambda: moment
    client = Client()
    print(READY, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        method = getattr(client, request["method"])
        extra: dict[str, Any] = {"headers": request.get("headers", {})}
        if "json" in request:
            extra |= {"data": json.dumps(request["json"]), "content_type": "application/json"}
        elif "data" in request:
            extra["data"] = request["data"]
        print(json.dumps(answer(method(request["path"], **extra))), flush=True)


if __name__ == "__main__":
    main()
