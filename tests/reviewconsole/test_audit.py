"""Audit events are append-only and written inside the transaction they record."""

from __future__ import annotations

import pytest
from django.db import transaction

from reviewconsole.audit import event_record
from reviewconsole.models import Action, AppendOnlyError, Event

pytestmark = pytest.mark.django_db(transaction=True)


def record() -> Event:
    with transaction.atomic():
        return event_record(actor=None, action=Action.LEXICON_CHANGE, target="synonym:x")


def test_events_cannot_be_updated_or_deleted() -> None:
    event = record()

    event.reason = "rewritten"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        Event.objects.filter(pk=event.pk).update(reason="rewritten")
    with pytest.raises(AppendOnlyError):
        Event.objects.all().delete()
    assert Event.objects.get(pk=event.pk).reason == ""


def test_events_outside_a_transaction_are_refused() -> None:
    with pytest.raises(RuntimeError):
        event_record(actor=None, action=Action.LEXICON_CHANGE, target="synonym:x")


def test_an_event_rolls_back_with_its_change() -> None:
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        event_record(actor=None, action=Action.LEXICON_CHANGE, target="synonym:y")
        _ = 1 / 0
    assert not Event.objects.filter(target="synonym:y").exists()


def test_system_actor_is_named() -> None:
    assert record().actor_name == "system"
