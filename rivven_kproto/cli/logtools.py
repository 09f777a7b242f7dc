"""``kproto log dump|verify``: read segments offline, from a data dir, partition dir or ``.log`` file.

Safe while the broker runs (read only), but a segment being appended to may end in a batch that
is still being written; stop the broker (or copy the files) for a verdict that means anything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from rivven_kproto.codec.compression import CompressionError, codec_of
from rivven_kproto.codec.records.batch import BatchFormatError
from rivven_kproto.codec.records.control import parse_control_record
from rivven_kproto.codec.records.records import decode_batch

from .output import fail, plural, settings, text
from .segments import Damage, ScannedBatch, scan_segment, segment_base_offset, segment_files

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@click.group()
def log() -> None:
    """Inspect a data directory offline: dump or verify segments.

    \b
    Example:
      kproto log verify ./kproto-data
    """


def _segments(path: Path) -> list[Path]:
    try:
        files = segment_files(path)
    except OSError as exc:
        fail("KAFKA_STORAGE_ERROR", f"cannot read {path}: {exc.strerror or exc}")
    if not files:
        fail("LOG_DIR_NOT_FOUND", f"no segment files (<base offset>.log) under {path}")
    return files


def _walk(files: list[Path]) -> Iterator[tuple[Path, ScannedBatch | Damage]]:
    for file in files:
        try:
            with file.open("rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                for item in scan_segment(stream, size, segment_base_offset(file)):
                    yield file, item
        except OSError as exc:
            fail("KAFKA_STORAGE_ERROR", f"cannot read {file}: {exc.strerror or exc}")


def _records_json(scanned: ScannedBatch) -> list[dict[str, Any]]:
    """The batch's records (decoded even if the CRC is wrong); raises ValueError when undecodable."""
    batch = decode_batch(scanned.data, verify_crc=False)
    out: list[dict[str, Any]] = []
    for offset, timestamp, record in batch.iter_absolute():
        if batch.is_control:
            try:
                kind, epoch = parse_control_record(record)
                out.append({"offset": offset, "timestamp": timestamp, "control": kind.name, "coordinator_epoch": epoch})
            except BatchFormatError:
                out.append({"offset": offset, "timestamp": timestamp, "control": "UNKNOWN", "coordinator_epoch": None})
            continue
        headers = [{"key": k, "value": text(v)} for k, v in record.headers]
        out.append({"offset": offset, "timestamp": timestamp, "key": text(record.key), "value": text(record.value), "headers": headers})
    return out


def _compression_name(attributes: int) -> str:
    try:
        return codec_of(attributes & 0x07).name.lower()
    except CompressionError:
        return f"unknown({attributes & 0x07})"


def _batch_json(file: Path, scanned: ScannedBatch, with_records: bool) -> dict[str, Any]:
    h = scanned.header
    data: dict[str, Any] = {
        "file": str(file),
        "position": scanned.position,
        "base_offset": h.base_offset,
        "last_offset": h.last_offset,
        "count": h.records_count,
        "size": h.size,
        "partition_leader_epoch": h.partition_leader_epoch,
        "compression": _compression_name(h.attributes),
        "timestamp_type": TIMESTAMP_TYPES[h.timestamp_type],
        "base_timestamp": h.base_timestamp,
        "max_timestamp": h.max_timestamp,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "transactional": h.is_transactional,
        "control": h.is_control,
        "crc": f"0x{h.crc:08x}",
        "crc_valid": h.crc == scanned.computed_crc,
        "problem": scanned.problem,
    }
    if with_records:
        try:
            data["records"] = _records_json(scanned)
        except (ValueError, CompressionError) as exc:
            data["records"] = None
            data["problem"] = scanned.problem or f"records undecodable: {exc}"
    return data


def _batch_line(batch: dict[str, Any]) -> str:
    flags = "".join(
        [
            " transactional" if batch["transactional"] else "",
            " control" if batch["control"] else "",
        ]
    )
    line = (
        f"baseOffset: {batch['base_offset']} lastOffset: {batch['last_offset']} count: {batch['count']}"
        f" position: {batch['position']} size: {batch['size']} {batch['timestamp_type']}: {batch['max_timestamp']}"
        f" producerId: {batch['producer_id']} producerEpoch: {batch['producer_epoch']}"
        f" baseSequence: {batch['base_sequence']} compression: {batch['compression']}"
        f" crc: {batch['crc']} crcValid: {str(batch['crc_valid']).lower()}{flags}"
    )
    if batch["problem"]:
        line += f" PROBLEM: {batch['problem']}"
    return line


def _record_line(record: dict[str, Any]) -> str:
    if "control" in record:
        return f"| offset: {record['offset']} endTxnMarker: {record['control']} coordinatorEpoch: {record['coordinator_epoch']}"
    headers = ",".join(f"{h['key']}={h['value'] if h['value'] is not None else ''}" for h in record["headers"])
    return f"| offset: {record['offset']} timestamp: {record['timestamp']} key: {record['key']} value: {record['value']} headers: {headers}"


def _where(file: Path, damage: Damage | ScannedBatch, previous_last: int | None) -> str:
    if isinstance(damage, ScannedBatch):
        return f"{file}: batch at offset {damage.header.base_offset} (byte {damage.position})"
    if damage.offset is not None:
        return f"{file}: batch at offset {damage.offset} (byte {damage.position})"
    after = f"after offset {previous_last}" if previous_last is not None else "at the start"
    return f"{file}: byte {damage.position} ({after})"


@log.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--records", "with_records", is_flag=True, help="Also print every record (control records as markers).")
def dump(path: Path, with_records: bool) -> None:
    """Print every batch: offsets, producer id/epoch/sequence, flags, compression, CRC check.

    \b
    Example:
      kproto log dump ./kproto-data/demo-0 --records
    """
    as_json = settings().json
    current: Path | None = None
    for file, item in _walk(_segments(path)):
        if not as_json and file != current:
            click.echo(f"Dumping {file}")
            current = file
        if isinstance(item, Damage):
            entry = {"file": str(file), "position": item.position, "offset": item.offset, "damage": item.problem}
            click.echo(json.dumps(entry, sort_keys=True) if as_json else f"DAMAGE at byte {item.position}: {item.problem}")
            continue
        batch = _batch_json(file, item, with_records)
        if as_json:
            click.echo(json.dumps(batch, sort_keys=True, separators=(",", ":")))
            continue
        click.echo(_batch_line(batch))
        for record in batch.get("records") or []:
            click.echo(_record_line(record))


@log.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--deep", is_flag=True, help="Also decompress and decode every record.")
def verify(path: Path, deep: bool) -> None:
    """Check every batch (length, magic, offsets, CRC-32C); exit 1 at the first bad one.

    \b
    Example:
      kproto log verify ./kproto-data/demo-0/00000000000000000000.log
    """
    files = _segments(path)
    batches = records = 0
    previous: dict[Path, int] = {}
    for file, item in _walk(files):
        if isinstance(item, Damage):
            fail("CORRUPT_MESSAGE", f"{_where(file, item, previous.get(file))}: {item.problem}")
        if item.problem is None and deep and item.header.records_count > 0:
            try:
                decode_batch(item.data)
            except (ValueError, CompressionError) as exc:
                item.problem = f"records undecodable: {exc}"
        if item.problem is not None:
            fail("CORRUPT_MESSAGE", f"{_where(file, item, previous.get(file))}: {item.problem}")
        batches += 1
        records += item.header.records_count
        previous[file] = item.header.last_offset
    data = {"ok": True, "files": len(files), "batches": batches, "records": records}
    if settings().json:
        click.echo(json.dumps(data, sort_keys=True, indent=2))
    else:
        click.echo(f"ok: {plural(len(files), 'segment file')}, {plural(batches, 'batch', 'batches')}, {plural(records, 'record')}")

