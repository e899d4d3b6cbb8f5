"""A second instance of the console, in a process of its own, for tests of what instances share.

    DATABASE_URL=… [PROBE_NOW=ISO-8601] [PROBE_SETTINGS=JSON] python -m tests.instance_probe

sets Django up against the database ``DATABASE_URL`` names (the test's own), prints ``ready``
and then answers one request per line of its standard input, through the whole request stack
(every middleware, the URL router, the views, the API), with one client whose cookies persist:

    {"method": "get" | "post", "path": "/…", "json": {…}?, "data": {…}?, "headers": {…}?}

Each answer is one line: ``{"status", "headers", "cookies", "json" | "text"}``. Its caches, its
connections and its memory are its own, as another web instance's are: what it answers after
the test process wrote something shows what another instance would answer. ``PROBE_NOW`` fixes
its clock (``reviewconsole.clock``) at the instant the test's own clock is frozen at;
``PROBE_SETTINGS`` (a JSON object) sets the settings it names, as the test's own are.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import Any

READY = "ready"


def answer(response: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "status": response.status_code,
        "headers": dict(response.headers),
        "cookies": {name: morsel.value for name, morsel in response.cookies.items()},
    }
    if response.get("Content-Type", "").startswith("application/json"):
        found["json"] = json.loads(response.content)
    else:
        found["text"] = response.content.decode(errors="replace")
    return found


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    # Settings the test process runs with and this one must share (e.g. its password hashers).
    for name, value in json.loads(os.environ.get("PROBE_SETTINGS", "{}")).items():
        setattr(settings, name, value)

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
