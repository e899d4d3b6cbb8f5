"""Shared fixtures: one user per role, and a movable clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser

from reviewconsole import clock
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role

PASSWORD = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """Tests hash many passwords; production's deliberately slow hasher adds nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def make_user(db: None) -> Callable[[str, str], AbstractUser]:
    def make(username: str, role: str) -> AbstractUser:
        return user_set_role(username=username, role=role, password=PASSWORD)

    return make


@pytest.fixture
def operator(make_user: Callable[[str, str], AbstractUser]) -> AbstractUser:
    return make_user("olivia", Role.OPERATOR)


@pytest.fixture
def reviewer(make_user: Callable[[str, str], AbstractUser]) -> AbstractUser:
    return make_user("rita", Role.REVIEWER)


@pytest.fixture
def second_reviewer(make_user: Callable[[str, str], AbstractUser]) -> AbstractUser:
    return make_user("ravi", Role.REVIEWER)


@pytest.fixture
def admin_user(make_user: Callable[[str, str], AbstractUser]) -> AbstractUser:
    return make_user("ada", Role.ADMIN)


@pytest.fixture
def agent(make_user: Callable[[str, str], AbstractUser]) -> AbstractUser:
    return make_user("agent-7", Role.AGENT)


class FrozenClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[datetime], FrozenClock]]:
    """``frozen_clock(at)`` pins ``reviewconsole.clock.now`` until the test ends."""

    def freeze(at: datetime) -> FrozenClock:
        frozen = FrozenClock(at)
        monkeypatch.setattr(clock, "now", frozen)
        return frozen

    yield freeze
