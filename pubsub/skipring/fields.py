"""The skip ring's own field types on the wire, taught to the kernel codec (`pubsub.kernel.wire`).

========================  ================================================================
annotation                on the wire
========================  ================================================================
``Label``                 str of 0/1, 1..64 characters (decoded to `Label`)
``Contact``               ``[label_bits, ref]`` (decoded to `Contact`)
``Flag``                  one of the Literal's strings ("CYC", "LIN"; the codec's Literal)
========================  ================================================================

`register` is called once by the package (`pubsub.skipring.__init__`), so that importing
any skip-ring module makes its messages decodable.  The publications' field types are the
shared layer's (`pubsub.publications.fields`).
"""

from __future__ import annotations

from pubsub.kernel.wire import WireError, register_field_type, short, validate_ref
from pubsub.skipring.labels import MAX_LABEL_BITS, Label, LabelError
from pubsub.skipring.messages import Contact


def validate_label(value: object) -> Label:
    """A label: a string of 1..64 characters 0/1."""
    if not isinstance(value, str) or len(value) > MAX_LABEL_BITS:
        raise WireError("bad_field", f"label must be 1..{MAX_LABEL_BITS} bits, got {short(value)}")
    try:
        return Label(value)
    except LabelError as exc:
        raise WireError("bad_field", str(exc)) from None


def validate_contact(value: object) -> Contact:
    """A contact [label_bits, ref]."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise WireError("bad_field", f"contact must be [label, ref], got {short(value)}")
    return Contact(validate_label(value[0]), validate_ref(value[1]))


def _encode_label(value: Label) -> str:
    return value.bits


def _encode_contact(value: Contact) -> list[str]:
    return [value.label.bits, value.ref]


def register() -> None:
    """Teach the kernel codec the skip ring's field types (idempotent)."""
    register_field_type(Label, validate_label, _encode_label)
    register_field_type(Contact, validate_contact, _encode_contact)
