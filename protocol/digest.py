"""CIDs and the 32-byte digests stored on-chain.

The contracts store a ``bytes32``: the sha2-256 digest inside a CID's multihash. A CIDv1 is
``<version 1><codec><multihash 0x12 0x20 <digest>>``, so the digest alone loses the version
(always 1 here) and the codec. We recover the codec by **convention, not by guessing**:

* every digest that goes on-chain names a **raw** block (codec 0x55): the whole object is one
  IPFS block whose bytes are the object itself (``ipfs add --cid-version 1 --raw-leaves`` of a
  file no bigger than one chunk). Its digest is then simply ``sha256(object bytes)``, so anyone
  can check an on-chain digest against a file without IPFS, and ``digest -> CID -> digest``
  round-trips exactly. Checkpoint manifests and other small on-chain objects follow this rule;
  :func:`digest_to_cid` defaults to it.
* larger objects (weight shards) are dag-pb UnixFS trees. Their CIDs never go on-chain as
  digests; they are written in full inside a manifest. :func:`digest_to_cid` can still build a
  dag-pb CID when the caller knows the codec (``codec=DAG_PB``).

We rejected "try raw, then dag-pb" at fetch time: on a live network a lookup of a CID that
nobody holds only ends at a timeout, so guessing would turn every miss into a long stall.

One type for such a digest, :class:`Digest` (bytes32 inside, ``0x`` + 64 hex digits as text);
the CID conversions below; :class:`WorkId`, a submission's bytes32 id, with the same text form; and
:func:`hex_text`, the one place that writes bytes as ``0x`` + hex. Pure functions; no I/O.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, ClassVar, Final, Self

from pydantic_core import core_schema

RAW: Final = 0x55
DAG_PB: Final = 0x70
SHA2_256: Final = 0x12
DIGEST_BYTES: Final = 32
_KNOWN_CODECS: Final = {RAW: "raw", DAG_PB: "dag-pb"}
_BASE58_ALPHABET: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


class InvalidCid(ValueError):
    """A string that is not a CID this project can use (sha2-256, codec raw or dag-pb)."""


class InvalidDigest(ValueError):
    """A value that is not a 32-byte sha2-256 digest."""


class InvalidWorkId(InvalidDigest):
    """A value that is not a 32-byte work id (a keccak-256 digest, so bad input exits 2 like InvalidDigest)."""


def hex_text(data: bytes) -> str:
    """``data`` as text: ``0x`` + lowercase hex digits — digests, work ids, hashes, keys and selectors alike."""
    return "0x" + bytes(data).hex()


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise InvalidCid("malformed varint in CID")


def _base58_decode(text: str) -> bytes:
    number = 0
    for char in text:
        index = _BASE58_ALPHABET.find(char)
        if index < 0:
            raise InvalidCid(f"character {char!r} is not base58btc")
        number = number * 58 + index
    leading_zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    return b"\x00" * leading_zeros + body


def _base32_decode(text: str) -> bytes:
    padded = text.upper() + "=" * (-len(text) % 8)
    try:
        return base64.b32decode(padded)
    except ValueError as exc:
        raise InvalidCid("not valid base32") from exc


def _parse(cid: str) -> tuple[int, int, bytes]:
    """Return (version, codec, digest) of a CID string."""
    if not isinstance(cid, str) or not cid:
        raise InvalidCid(f"CID must be a non-empty string, got {cid!r}")
    if cid.startswith("Qm") and len(cid) == 46:
        raw = _base58_decode(cid)
        version, codec, multihash = 0, DAG_PB, raw
    elif cid[0] == "b":
        raw = _base32_decode(cid[1:])
        version, pos = _decode_varint(raw, 0)
        if version != 1:
            raise InvalidCid(f"unsupported CID version {version}")
        codec, pos = _decode_varint(raw, pos)
        multihash = raw[pos:]
    else:
        raise InvalidCid(f"{cid!r}: only CIDv0 (Qm…) and base32 CIDv1 (b…) are supported")
    hash_code, pos = _decode_varint(multihash, 0)
    length, pos = _decode_varint(multihash, pos)
    digest = multihash[pos:]
    if hash_code != SHA2_256 or length != DIGEST_BYTES or len(digest) != DIGEST_BYTES:
        raise InvalidCid(f"{cid}: multihash is not a 32-byte sha2-256 digest")
    if codec not in _KNOWN_CODECS:
        raise InvalidCid(f"{cid}: codec 0x{codec:x} is neither raw nor dag-pb")
    return version, codec, digest


def cid_to_digest(cid: str) -> Digest:
    """The 32-byte sha2-256 digest inside ``cid`` (CIDv0 or base32 CIDv1)."""
    return Digest(_parse(cid)[2])


def cid_codec(cid: str) -> int:
    """The multicodec of ``cid``: :data:`RAW` or :data:`DAG_PB`."""
    return _parse(cid)[1]


def digest_to_cid(digest: bytes | str, codec: int = RAW) -> str:
    """The base32 CIDv1 for a sha2-256 ``digest`` (bytes or ``0x`` text) under ``codec``."""
    digest = Digest.parse(digest)
    if codec not in _KNOWN_CODECS:
        raise InvalidCid(f"codec 0x{codec:x} is neither raw nor dag-pb")
    binary = (
        _encode_varint(1)
        + _encode_varint(codec)
        + _encode_varint(SHA2_256)
        + _encode_varint(DIGEST_BYTES)
        + digest
    )
    return "b" + base64.b32encode(binary).decode("ascii").lower().rstrip("=")


class _Bytes32(bytes):
    """32 bytes whose one text form is ``0x`` + 64 lowercase hex digits (``str(value)``): what :class:`Digest`
    and :class:`WorkId` share. A ``bytes`` subclass: equal to its plain 32 bytes and hashed alike."""

    _noun: ClassVar[str]
    _invalid: ClassVar[type[InvalidDigest]]
    _bare_hex: ClassVar[bool] = False
    """Whether :meth:`parse` also takes the 64 hex digits without ``0x``."""

    def __new__(cls, value: bytes | bytearray) -> Self:
        if not isinstance(value, (bytes, bytearray)) or len(value) != DIGEST_BYTES:
            raise cls._invalid(f"a {cls._noun} is {DIGEST_BYTES} bytes, got {value!r:.80}")
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, value: bytes | bytearray | str) -> Self:
        """From the 32 bytes or from the text form ``0x…``."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            digits = value[2:] if value.startswith("0x") else value if cls._bare_hex else ""
            if len(digits) != 2 * DIGEST_BYTES:
                raise cls._invalid(f"a {cls._noun} is written 0x + 64 hex digits, got {value!r:.80}")
            try:
                return cls(bytes.fromhex(digits))
            except ValueError:  # bytes.fromhex skips spaces: fewer bytes than digits is not hex either
                raise cls._invalid(f"{value!r:.80} is not hex") from None
        return cls(value)

    def __str__(self) -> str:
        return hex_text(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


class Digest(_Bytes32):
    """A 32-byte sha2-256 digest as the contracts store it (``bytes32``): a rollout file, a manifest, a run
    spec, an evidence document. Its one text form is ``0x`` + 64 lowercase hex digits (``str(digest)``), in
    files, JSON, logs and on the command line alike; :meth:`parse` takes the 32 bytes or that text. Usable as a
    pydantic field type."""

    _noun = "digest"
    _invalid = InvalidDigest

    @classmethod
    def of(cls, data: bytes) -> Digest:
        """The digest of ``data`` (what a raw-block CID of ``data`` names)."""
        return cls(hashlib.sha256(data).digest())

    @property
    def cid(self) -> str:
        """The raw-block CIDv1 this digest names (the on-chain convention above)."""
        return digest_to_cid(self, RAW)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.parse, serialization=core_schema.plain_serializer_function_ser_schema(str),
            json_schema_input_schema=core_schema.str_schema(pattern=r"^0x[0-9a-f]{64}$"),
        )


class WorkId(_Bytes32):
    """A submission's id, the ``bytes32 workId`` the ComputePool derives from its binding
    (:func:`protocol.submission.work_id_of`). Its one text form is ``0x`` + 64 lowercase hex digits (``.text``,
    ``str(work_id)``), in JSON, reports and logs alike; :meth:`parse` takes the 32 bytes, that text, or the 64
    bare hex digits a worker's journal holds. Equal to its plain 32 bytes and hashed alike, so it finds what a
    dict or set holds under the bytes, and the bytes find what it holds."""

    _noun = "work id"
    _invalid = InvalidWorkId
    _bare_hex = True

    @property
    def text(self) -> str:
        """``0x`` + 64 lowercase hex digits."""
        return hex_text(self)


def cid_of_reference(ref: bytes | str) -> str:
    """The CID an on-chain digest (bytes, or text ``0x…``) or a CID string names (a checkpoint's manifest, a run
    spec); InvalidDigest or InvalidCid when it is neither."""
    if isinstance(ref, str) and not ref.startswith("0x"):
        cid_to_digest(ref)  # validates
        return ref
    return Digest.parse(ref).cid


def raw_cid_of(data: bytes) -> str:
    """The raw-codec CIDv1 that Kubo gives ``data`` when it is stored as one block."""
    return digest_to_cid(hashlib.sha256(data).digest(), RAW)
