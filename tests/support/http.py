"""A local webhook endpoint's record of what was posted to it (served by the ``webhook`` fixture)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Webhook:
    """A local HTTP endpoint that records what is posted to it and answers with ``status``."""

    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200

    @property
    def bodies(self) -> list[Any]:
        return [r["body"] for r in self.received]
