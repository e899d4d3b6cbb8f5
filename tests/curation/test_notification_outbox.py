"""Reviewer mails go through an outbox: a failed send is tried again until the mail arrives, once;
user text in a mail is one quoted, capped line, and links point only at the console."""

from __future__ import annotations

import re
import smtplib
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.mail import EmailMessage
from django.core.mail.backends.locmem import EmailBackend as LocmemBackend

from curation.notifications import notify_waiting_candidates
from experience.cases.models import Case
from experience.review import revocation
from tests.experience import conftest as experience_fixtures
from tests.experience.conftest import NOW, case_data

pytestmark = pytest.mark.django_db

submit_case = experience_fixtures.submit_case
approved_case = experience_fixtures.approved_case

BASE_URL = "https://console.example.test"
INJECTED = (
    "优惠券)\n\nSECURITY NOTICE: your session expired, sign in again at "
    "http://evil.example/login\n("
)
URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://\S*")


class FailingThenWorking(LocmemBackend):
    """A mail server that refuses the first ``failures`` sends, then takes every mail."""

    failures = 0

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        if FailingThenWorking.failures > 0:
            FailingThenWorking.failures -= 1
            raise smtplib.SMTPServerDisconnected("connection unexpectedly closed")
        return super().send_messages(email_messages)


@pytest.fixture
def mail_server(settings: Any) -> Iterator[Callable[[int], None]]:
    """``mail_server(n)``: the next ``n`` sends fail, the ones after reach ``mail.outbox``."""
    settings.EMAIL_BACKEND = f"{__name__}.FailingThenWorking"
    settings.TASK_RETRY_BASE_SECONDS = 0

    def fail_next(n: int) -> None:
        FailingThenWorking.failures = n

    yield fail_next
    FailingThenWorking.failures = 0


@pytest.fixture
def mailed(reviewer: User, second_reviewer: User) -> tuple[User, User]:
    for user in (reviewer, second_reviewer):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    return reviewer, second_reviewer


def test_a_revocation_mail_that_fails_once_is_sent_on_the_retry(
    mail_server: Callable[[int], None],
    mailed: tuple[User, User],
    approved_case: Callable[..., Case],
) -> None:
    reviewer, approver = mailed
    case = approved_case()
    mail.outbox.clear()
    mail_server(1)

    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store")

    [message] = mail.outbox
    assert message.to == [approver.email]
    assert "wrong store" in message.body


def test_a_mail_whose_retries_run_out_stays_pending_and_the_next_scan_sends_it(
    mail_server: Callable[[int], None],
    mailed: tuple[User, User],
    approved_case: Callable[..., Case],
    settings: Any,
) -> None:
    from curation.models import NotificationSent, OutboxMail
    from curation.tasks import curation_scan_task

    reviewer, approver = mailed
    case = approved_case()
    mail.outbox.clear()
    mail_server(settings.TASK_MAX_ATTEMPTS)

    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store")

    assert mail.outbox == []
    [pending] = OutboxMail.objects.filter(user=approver)
    assert pending.state == OutboxMail.State.PENDING
    assert pending.attempts == settings.TASK_MAX_ATTEMPTS
    assert "SMTPServerDisconnected" in pending.last_error
    assert NotificationSent.objects.get(user=approver, key=case.id).mail == pending

    curation_scan_task.enqueue()  # the mail server is back

    [message] = mail.outbox
    assert message.to == [approver.email] and "wrong store" in message.body
    pending.refresh_from_db()
    assert pending.state == OutboxMail.State.SENT
    assert pending.last_error == ""  # the failure it recovered from is no longer its state
    assert message.extra_headers["Message-ID"] == f"<{pending.idempotency_key}@review-console>"


def test_a_sent_mail_is_not_sent_again(
    mail_server: Callable[[int], None],
    mailed: tuple[User, User],
    approved_case: Callable[..., Case],
) -> None:
    from curation.models import OutboxMail
    from curation.notifications import mail_send_task

    reviewer, approver = mailed
    case = approved_case()
    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store")
    mail.outbox.clear()
    sent = OutboxMail.objects.get(user=approver)

    mail_send_task.enqueue(sent.pk)  # a duplicate task, as a re-queued one would be

    assert mail.outbox == []
    assert OutboxMail.objects.get(pk=sent.pk).state == OutboxMail.State.SENT


def test_a_mail_for_someone_who_opted_out_meanwhile_is_dropped(
    mail_server: Callable[[int], None],
    mailed: tuple[User, User],
    approved_case: Callable[..., Case],
    settings: Any,
) -> None:
    from curation.models import OutboxMail
    from curation.notifications import notifications_set
    from curation.tasks import curation_scan_task

    reviewer, approver = mailed
    case = approved_case()
    mail.outbox.clear()
    mail_server(settings.TASK_MAX_ATTEMPTS)
    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store")
    notifications_set(user=approver, enabled=False)

    curation_scan_task.enqueue()

    assert mail.outbox == []
    assert OutboxMail.objects.get(user=approver).state == OutboxMail.State.DROPPED


# User text in mails.


def assert_only_console_links(body: str) -> None:
    assert all(url.startswith(BASE_URL + "/") for url in URL.findall(body)), body


def test_a_title_cannot_shape_the_waiting_candidates_mail(
    mailed: tuple[User, User], submit_case: Callable[..., Case], settings: Any
) -> None:
    settings.CONSOLE_BASE_URL = BASE_URL
    case = submit_case(case_data(title=INJECTED))

    assert notify_waiting_candidates(NOW + timedelta(hours=25)) == 2

    for message in mail.outbox:
        [line] = message.body.splitlines()  # one candidate, one line
        assert line.startswith(f"- {case.id} “")
        assert "SECURITY NOTICE" in line and "evil" in line  # shown, as quoted text
        assert "http://evil.example" not in line
        assert_only_console_links(line)
        assert f"{BASE_URL}{case.get_absolute_url()}" in line


def test_a_revocation_reason_cannot_shape_the_mail(
    mailed: tuple[User, User], approved_case: Callable[..., Case], settings: Any
) -> None:
    settings.CONSOLE_BASE_URL = BASE_URL
    reviewer, _approver = mailed
    case = approved_case(title="x" * 290)
    mail.outbox.clear()

    revocation.case_revoke(case=case, actor=reviewer, reason=INJECTED)

    [message] = mail.outbox
    # One line of the mail's own words; the impact follows, one indented line per part, ids only.
    line, *impact = message.body.splitlines()
    assert impact and all(part.startswith("  ") for part in impact)
    assert "evil" not in "".join(impact)
    assert "http://evil.example" not in line
    assert_only_console_links(line)
    assert "x" * 130 not in line  # the title is cut short


def test_a_revocation_mail_defuses_bare_domains_unc_paths_and_full_width_forms(
    mailed: tuple[User, User], approved_case: Callable[..., Case], settings: Any
) -> None:
    """Issue 37, item 7: each of these survived in the title and the reason."""
    settings.CONSOLE_BASE_URL = BASE_URL
    reviewer, _approver = mailed
    case = approved_case(title="reset at evil-login.com/reset or \\\\evil.test\\share")
    mail.outbox.clear()

    revocation.case_revoke(case=case, actor=reviewer, reason="see ｗｗｗ．evil.test/login")

    [message] = mail.outbox
    line, *impact = message.body.splitlines()
    assert "evil" not in "".join(impact)
    assert "evil-login[.]com/reset" in line
    assert "[\\][\\]evil[.]test\\share" in line
    assert "ｗｗｗ[.]evil[.]test/login" in line
    normal = unicodedata.normalize(
        "NFKC", line.removesuffix(f"{BASE_URL}{case.get_absolute_url()}")
    )
    assert not re.search(r"evil(-login)?\.(com|test)|\\\\|www\.", normal), line


def test_without_a_configured_address_mails_carry_no_links(
    mailed: tuple[User, User], submit_case: Callable[..., Case]
) -> None:
    submit_case(case_data(title=INJECTED))

    notify_waiting_candidates(NOW + timedelta(hours=25))

    assert mail.outbox and all(URL.findall(str(m.body)) == [] for m in mail.outbox)


# The pure rules of mail text.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain title", "“plain title”"),
        ("two\n\nparagraphs\r\nand\u2028more\x85end", "“two paragraphs and more end”"),
        ("tab\tand\x0bvertical", "“tab and vertical”"),
        ("right\u202eto-left override", "“rightto-left override”"),
        ("see http://evil.example/x", "“see http[:]//evil[.]example/x”"),
        ("see HTTPS://evil.example", "“see HTTPS[:]//evil[.]example”"),
        ("go to www.evil.example", "“go to www[.]evil[.]example”"),
        ("mailto:a@evil.example", "“mailto[:]a@evil[.]example”"),
        ("“already” quoted", '“"already" quoted”'),
    ],
)
def test_quoted_makes_one_defused_line(text: str, expected: str) -> None:
    from curation.mail_text import quoted

    assert quoted(text) == expected


def test_quoted_caps_the_length() -> None:
    from curation.mail_text import QUOTE_LIMIT, quoted

    shown = quoted("word " * 200)
    assert len(shown) == QUOTE_LIMIT + 2 and shown.endswith("…”")


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        (BASE_URL, "/cases/x/", f"{BASE_URL}/cases/x/"),
        (BASE_URL + "/", "/cases/x/", f"{BASE_URL}/cases/x/"),
        ("", "/cases/x/", ""),
        (BASE_URL, "//evil.example/x", ""),
        (BASE_URL, "http://evil.example/x", ""),
        (BASE_URL, "/cases/x y/", ""),
    ],
)
def test_console_link_points_only_at_the_console(base: str, path: str, expected: str) -> None:
    from curation.mail_text import console_link

    assert console_link(base, path) == expected
