"""The parameters of one fault injection (`pubsub.runtime.admin`), validated one by one;
whatever is left over is refused, so nothing is half applied."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Topic

#: Longest partition or drop accepted, seconds.
MAX_DURATION = 24 * 3600.0
#: Most junk messages one corrupt_node may send.
MAX_JUNK = 1000
#: Most references in a pool or a partition.
MAX_REFS = 4096
_MARKER_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


class ChaosError(Exception):
    """A request that is refused; `code` is machine-readable, `detail` one line."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def new_marker_id(action: str) -> str:
    """A marker id unique within any practical run: the action and 48 random bits."""
    return f"{action}-{uuid.uuid4().hex[:12]}"


class Params:
    """The params of one request, taken one by one; whatever is left over is refused."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = dict(raw)

    def take(self, name: str) -> Any:
        """The raw value of param `name` (None when absent), taken out of what is left."""
        return self._raw.pop(name, None)

    def done(self) -> None:
        if self._raw:
            raise ChaosError("bad_params", f"unknown parameter(s): {', '.join(sorted(self._raw))}")

    def topic(self) -> Topic | None:
        value = self.take("topic")
        if value is None:
            return None
        try:
            return wire.validate_topic(value)
        except wire.WireError as exc:
            raise ChaosError("bad_params", f"topic: {exc.detail}") from None

    def seed(self) -> int | None:
        value = self.take("seed")
        if value is None:
            return None
        if type(value) is not int:
            raise ChaosError("bad_params", f"seed must be an integer, got {value!r}"[:200])
        return value

    def number(self, name: str, low: float, high: float, *, low_open: bool) -> float:
        value = self.take(name)
        if value is None:
            raise ChaosError("bad_params", f"{name} is required")
        if type(value) not in (int, float) or value != value:  # bools and NaN are not numbers
            raise ChaosError("bad_params", f"{name} must be a number, got {value!r}"[:200])
        if (value <= low if low_open else value < low) or value > high:
            bracket = "(" if low_open else "["
            raise ChaosError(
                "bad_params", f"{name} must be in {bracket}{low:g}, {high:g}], got {value:g}"
            )
        return float(value)

    def count(self, name: str, default: int, high: int) -> int:
        value = self.take(name)
        if value is None:
            return default
        if type(value) is not int or not 0 <= value <= high:
            raise ChaosError(
                "bad_params", f"{name} must be an integer in [0, {high}], got {value!r}"[:200]
            )
        return value

    def refs(self, name: str, *, required: bool) -> list[Ref] | None:
        value = self.take(name)
        if value is None:
            if required:
                raise ChaosError("bad_params", f"{name} is required")
            return None
        if not isinstance(value, list) or not value or len(value) > MAX_REFS:
            raise ChaosError(
                "bad_params", f"{name} must be a list of 1..{MAX_REFS} HOST:PORT references"
            )
        try:
            return sorted({wire.validate_ref(ref) for ref in value})
        except wire.WireError as exc:
            raise ChaosError("bad_params", f"{name}: {exc.detail}") from None

    def marker(self, action: str) -> tuple[str, bool]:
        marker_id = self.take("marker_id")
        record = self.take("record")
        if marker_id is None:
            marker_id = new_marker_id(action)
        elif not isinstance(marker_id, str) or not _MARKER_ID.fullmatch(marker_id):
            raise ChaosError(
                "bad_params", "marker_id must be 1-100 letters, digits, '.', '_', ':' or '-'"
            )
        if record is None:
            record = True
        elif type(record) is not bool:
            raise ChaosError("bad_params", f"record must be true or false, got {record!r}"[:200])
        return marker_id, record

    def targets(self, default: Ref) -> list[Ref]:
        """Whom the marker names: `targets` when given (one injection over several daemons),
        else this daemon."""
        return self.refs("targets", required=False) or [default]
