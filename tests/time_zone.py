"""A fixture running a test in a time zone far from UTC (`TZ` and `time.tzset`), so a day
computed in the server's local time instead of UTC shows: every other test runs in UTC.

Import `far_time_zone` into a test module (it is a fixture) and mark the test
`@pytest.mark.usefixtures("far_time_zone")`."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

FAR_TIME_ZONE = "Pacific/Kiritimati"
"""UTC+14 all year: its calendar day differs from UTC's from 10:00 to 24:00 UTC."""


@pytest.fixture
def far_time_zone() -> Iterator[str]:
    """The process runs in `FAR_TIME_ZONE` for the test; `TZ` is restored after it."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = FAR_TIME_ZONE
    time.tzset()
    try:
        yield FAR_TIME_ZONE
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
