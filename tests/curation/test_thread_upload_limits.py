"""A thread file from outside is refused naming the field, never a server error, on both doors:
the console's upload form and ``import_thread``; nothing is stored."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from curation.models import Thread, ThreadMessage
from reviewconsole import inputs
from tests.curation.conftest import THREAD_ID, thread_json
from tests.helpers import run_json

pytestmark = pytest.mark.django_db


def _upload(client: Client, content: bytes) -> Any:
    upload = SimpleUploadedFile("thread.json", content, "application/json")
    return client.post(reverse("curation:thread-list"), {"file": upload})


def _with(**changes: Any) -> bytes:
    data = thread_json()
    data.update(changes)
    # ensure_ascii: NUL and lone surrogates travel as JSON escapes, as in a real file.
    return json.dumps(data).encode()


def _message_text(text: str) -> bytes:
    data = thread_json()
    data["messages"][0]["text"] = text
    return json.dumps(data).encode()


@pytest.fixture(autouse=True)
def nothing_stored(at_now: datetime) -> Any:
    yield
    assert not Thread.objects.exists() and not ThreadMessage.objects.exists()


def test_a_thread_nested_100000_deep_is_refused_naming_the_file(
    operator: User, client: Client
) -> None:
    client.force_login(operator)
    response = _upload(client, b"[" * 100_000 + b"]" * 100_000)
    assert response.status_code == 422
    assert response.context["import_error"] == f"file: {inputs.TOO_DEEP}"


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (_with(title="coupon\x00thread"), f"title: {inputs.NUL_TEXT}"),
        (_with(title="coupon\ud83dthread"), f"title: {inputs.BAD_UNICODE}"),
        (_message_text("refused\x00"), f"messages[0].text: {inputs.NUL_TEXT}"),
        (
            json.dumps(thread_json()).replace('"title"', '"title\\u0000"').encode(),
            f"title\\u0000: (a field name) {inputs.NUL_TEXT}",
        ),
        (
            json.dumps({**thread_json(), "source": 7})
            .replace(": 7,", ": 7" + "0" * 5000 + ",")
            .encode(),
            f"source: {inputs.INT_OUT_OF_RANGE}",
        ),
        (b'{"id": "x", "title": NaN}', f"title: {inputs.NOT_FINITE}"),
        (b'{"id": "\xff"}', f"file: {inputs.NOT_UTF8}"),
    ],
)
def test_an_upload_with_unstorable_values_is_refused_naming_the_field(
    operator: User, client: Client, content: bytes, error: str
) -> None:
    client.force_login(operator)
    response = _upload(client, content)
    assert response.status_code == 422
    assert response.context["import_error"] == error


def test_the_command_refuses_the_same_thread(operator: User, tmp_path: Any) -> None:
    path = tmp_path / "thread.json"
    path.write_bytes(_with(title="coupon\x00thread"))
    status, result = run_json("import_thread", str(path), "--as", operator.username)
    assert status != 0
    assert (result["field"], result["error"]) == ("title", inputs.NUL_TEXT)
    deep = tmp_path / "deep.json"
    deep.write_bytes(b"{" * 100_000)
    status, result = run_json("import_thread", str(deep), "--as", operator.username)
    assert status != 0
    assert (result["field"], result["error"]) == ("FILE", inputs.TOO_DEEP)


def test_a_good_upload_is_still_imported(operator: User, client: Client) -> None:
    client.force_login(operator)
    response = _upload(client, json.dumps(thread_json()).encode())
    assert response.status_code == 303
    Thread.objects.filter(thread_id=THREAD_ID).delete()
