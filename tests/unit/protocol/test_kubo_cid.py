"""CID <-> on-chain digest conversion: pure unit tests (the Kubo round-trip is in test_kubo_client)."""

import hashlib

import pytest

from protocol.digest import (
    DAG_PB,
    RAW,
    Digest,
    InvalidCid,
    InvalidDigest,
    InvalidWorkId,
    WorkId,
    cid_codec,
    cid_to_digest,
    digest_to_cid,
    hex_text,
    raw_cid_of,
)

# Well-known CIDs: the empty raw block, and the empty UnixFS directory (CIDv0 and CIDv1 forms).
EMPTY_RAW_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
EMPTY_DIR_V0 = "QmUNLLsPACCz1vLxQVkXqqLX5R1X345qqfHbsf67hvA3Nn"
EMPTY_DIR_V1 = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"


def test_raw_cid_of_empty_bytes_is_the_well_known_empty_raw_block() -> None:
    assert raw_cid_of(b"") == EMPTY_RAW_CID


def test_digest_of_a_raw_cid_is_the_sha256_of_its_bytes() -> None:
    assert cid_to_digest(EMPTY_RAW_CID) == hashlib.sha256(b"").digest()


@pytest.mark.parametrize("codec", [RAW, DAG_PB])
def test_digest_round_trips_through_a_cid(codec: int) -> None:
    digest = hashlib.sha256(b"proofswarm").digest()
    cid = digest_to_cid(digest, codec)
    assert cid_to_digest(cid) == digest
    assert cid_codec(cid) == codec
    assert digest_to_cid(cid_to_digest(cid), cid_codec(cid)) == cid


def test_cidv0_and_its_cidv1_form_carry_the_same_digest() -> None:
    assert cid_to_digest(EMPTY_DIR_V0) == cid_to_digest(EMPTY_DIR_V1)
    assert digest_to_cid(cid_to_digest(EMPTY_DIR_V0), DAG_PB) == EMPTY_DIR_V1
    assert cid_codec(EMPTY_DIR_V0) == DAG_PB


def test_a_digest_has_one_text_form() -> None:
    digest = hashlib.sha256(b"x").digest()
    parsed = Digest.parse(hex_text(digest))
    assert parsed == digest and Digest.parse(digest) == digest and Digest.of(b"x") == digest
    assert str(parsed) == hex_text(digest) and parsed.cid == digest_to_cid(digest) == raw_cid_of(b"x")
    assert digest_to_cid(hex_text(digest)) == digest_to_cid(digest)
    for other_form in (digest.hex(), f"0x{digest.hex().upper()[:-2]}zz"):
        with pytest.raises(InvalidDigest):
            Digest.parse(other_form)


def test_bytes_have_one_text_form() -> None:
    assert hex_text(b"\x00\xab") == "0x00ab" and hex_text(bytearray(b"\x01")) == "0x01" and hex_text(b"") == "0x"


def test_a_work_id_has_one_text_form_and_stays_its_bytes() -> None:
    raw = bytes(range(32))
    text = "0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    work_id = WorkId(raw)
    assert work_id.text == str(work_id) == f"{work_id}" == text and repr(work_id) == f"WorkId({text})"
    assert WorkId.parse(raw) == WorkId.parse(text) == WorkId.parse(text[2:]) == WorkId.parse(text.upper()[2:]) == raw
    assert isinstance(WorkId.parse(text), WorkId) and WorkId.parse(work_id) is work_id
    assert hash(work_id) == hash(raw) and {raw: "found"}[work_id] == "found" and work_id in {raw}


@pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, "0x1234", "zz" * 32, "0X" + "00" * 32,
                                 " " + "00" * 31 + " 0", 42])
def test_bad_work_ids_are_refused_as_bad_input(bad: object) -> None:
    with pytest.raises(InvalidWorkId) as refused:
        WorkId.parse(bad)  # type: ignore[arg-type]
    assert isinstance(refused.value, InvalidDigest)  # bad input: a command exits 2


def test_a_digest_is_a_pydantic_field() -> None:
    from pydantic import BaseModel

    class Doc(BaseModel):
        d: Digest

    doc = Doc(d="0x" + "ab" * 32)
    assert isinstance(doc.d, Digest) and doc.model_dump_json() == '{"d":"0x' + "ab" * 32 + '"}'
    assert Doc.model_validate_json(doc.model_dump_json()) == doc


@pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, "0x1234", "zz" * 32, 42])
def test_bad_digests_are_refused(bad: object) -> None:
    with pytest.raises(InvalidDigest):
        Digest.parse(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "hello",
        "bafy!!!",
        "zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA",  # base58 CIDv1: unsupported base
        # CIDv1 with a dag-cbor codec (0x71)
        "bafyreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
        # identity multihash, not sha2-256
        "bafkqaaa",
    ],
)
def test_bad_cids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidCid):
        cid_to_digest(bad)


def test_unknown_codec_is_refused_when_building_a_cid() -> None:
    with pytest.raises(InvalidCid):
        digest_to_cid(b"\x00" * 32, codec=0x71)
