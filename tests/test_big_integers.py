"""An integer that does not fit in 64 bits is refused wherever JSON comes in (NDJSON, the wire,
a CLI value), never read as an approximate float (the audit's two keys 2**64 + 1 and 2**64 + 2
became one, and the second write replaced the first)."""

from __future__ import annotations

import pytest

from a2e_mem import jsontext
from a2e_mem.protocol import Protocol

from .test_audit_followup import mem


@pytest.mark.parametrize("number", [2**64 + 1, 2**64 + 2, -(2**63) - 1, 10**40])
def test_an_integer_outside_64_bits_is_refused_as_bad_json(number):
    with pytest.raises(jsontext.IntegerTooLarge, match=str(number)):
        jsontext.loads(f'{{"key": {{"id": [1, {number}]}}}}')


def test_an_integer_of_thousands_of_digits_is_refused_too():
    """Found by an outside audit: orjson refuses a number past a double's range as bad JSON, and
    `mem store` (JSON if it parses, else text) kept the whole value as a string, exit 0."""
    for text in ('{"n": ' + "7" * 5000 + "}", '{"n": ' + "7" * 400 + "}", '{"n": 1e400}'):
        with pytest.raises(jsontext.IntegerTooLarge, match="too large to keep"):
            jsontext.loads(text)


def test_the_cli_refuses_an_integer_of_thousands_of_digits(home):
    out = mem(home, "store", '{"n": ' + "7" * 5000 + "}")
    assert out.returncode == 4 and b"too large to keep" in out.stderr


@pytest.mark.parametrize("number", [2**64 - 1, -(2**63), 10**18])
def test_the_64_bit_limits_and_long_digit_strings_are_read_exactly(number):
    assert jsontext.loads(f'{{"n": {number}, "s": "{"9" * 40}"}}'.encode()) == {"n": number, "s": "9" * 40}


def test_the_cli_refuses_a_huge_integer_and_stores_nothing(home):
    orders = ((2**64 + 1, "A"), (2**64 + 2, "B"))
    lines = "".join(f'{{"key":{{"id":{n}}},"content":"order {s}","tier":"episodic"}}\n' for n, s in orders).encode()
    out = mem(home, "store", "-", stdin=lines)
    assert out.returncode == 4 and b"does not fit in 64 bits" in out.stderr
    listed = mem(home, "retrieve", "--format", "ndjson")
    assert listed.returncode == 0 and listed.stdout == b""
    out = mem(home, "set", "n", str(2**64 + 1))
    assert out.returncode == 4 and b"does not fit in 64 bits" in out.stderr


def test_the_wire_answers_a_huge_integer_with_a_parse_error(service):
    line = f'{{"type":"handshake/req","id":"h1","version":"1.0","agent_id":"a","agent_caps":[],"n":{2**64 + 1}}}'
    reply = Protocol(service).handle(line)
    assert reply["type"] == "error" and reply["code"] == "parse_error" and reply["req_id"] == "h1"
