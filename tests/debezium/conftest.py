"""Fixtures of the real-Debezium modules."""

from __future__ import annotations

from datetime import datetime

import pytest

from logistics_platform.settings import local_settings
from tests.debezium.test_real_connector import newest_hour


@pytest.fixture(scope="module")
def landing_hour(tmp_path_factory: pytest.TempPathFactory) -> datetime:
    """The open hour, as a live sink lands in it: every config of the module lands there, so that their bronze rows
    can be compared whole."""
    return newest_hour(local_settings(tmp_path_factory.mktemp("hour")))
