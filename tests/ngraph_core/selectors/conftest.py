"""The ``net`` fixture: a fresh hand-built CNN (``selector_net.build_net``) per test."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from selector_net import build_net


@pytest.fixture
def net() -> SimpleNamespace:
    return build_net()
