"""Order-preserving integer codes for a changing set of values (order maintenance).

`broker.cores.matching.vectorised` codes the thresholds of each bound type with them, so that
one comparison of a code column against one code decides a bound for every subscription.
"""

from __future__ import annotations

from sortedcontainers import SortedList

from broker.cores.language.values import Value

_CODE_LOW = -(2**62)
_CODE_HIGH = 2**62
_CODE_STEP = 2**32


class OrderCodes:
    """Order-preserving int64 codes for a changing set of distinct values (order maintenance).

    A new value gets a code between its neighbours' (the midpoint, or a fixed step past the
    first/last); when no integer is free there, every value is relabelled evenly and the owner
    recodes its slots.  Equal values (``1`` and ``1.0``) share one code.
    """

    __slots__ = ("values", "code", "refs", "relabels")

    def __init__(self) -> None:
        self.values = SortedList()
        self.code: dict[Value, int] = {}
        self.refs: dict[Value, int] = {}
        self.relabels = 0

    def __len__(self) -> int:
        return len(self.values)

    def acquire(self, value: Value) -> bool:
        """Count one more use of ``value``; True if all codes changed (a relabelling)."""
        if value in self.refs:
            self.refs[value] += 1
            return False
        values = self.values
        values.add(value)
        self.refs[value] = 1
        at = values.index(value)
        lo = self.code[values[at - 1]] if at > 0 else None
        hi = self.code[values[at + 1]] if at + 1 < len(values) else None
        code: int | None
        if lo is None:
            if hi is None:  # noqa: SIM108 - a nested conditional expression reads worse
                code = 0
            else:
                code = hi - _CODE_STEP if hi - _CODE_STEP > _CODE_LOW else None
        elif hi is None:
            code = lo + _CODE_STEP if lo + _CODE_STEP < _CODE_HIGH else None
        else:
            code = (lo + hi) // 2 if hi - lo >= 2 else None
        if code is not None:
            self.code[value] = code
            return False
        # Spread over the middle half of the range, leaving room to append at both ends.
        step = (_CODE_HIGH - _CODE_LOW) // 2 // (len(values) + 1)
        base = _CODE_LOW // 2
        self.code = {v: base + step * (i + 1) for i, v in enumerate(values)}
        self.relabels += 1
        return True

    def release(self, value: Value) -> None:
        left = self.refs[value] - 1
        if left:
            self.refs[value] = left
            return
        del self.refs[value]
        del self.code[value]
        self.values.remove(value)
