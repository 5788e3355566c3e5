"""CRC32C (Castagnoli), masked as TFRecord files store it: the check on every record of a
TensorBoard event file. Pure Python (table-driven), so that recognising an event file needs no
optional package."""

from __future__ import annotations

_POLY = 0x82F63B78  # CRC32C, reflected


def _table() -> tuple[int, ...]:
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


_TABLE = _table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's mask: rotate right by 15 bits, add a constant (mod 2**32)."""
    x = crc32c(data)
    return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF
