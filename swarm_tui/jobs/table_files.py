"""Reading a table a job is made of, a batch of rows at a time: CSV, Parquet, plain-record JSONL
and a Hugging Face dataset saved with `save_to_disk` (a directory of Arrow stream files).

pyarrow reads them (the `data` extra): streaming, so a million rows are never held at once; a
file that is not what its name says, a CSV row with too many fields or a value that is not UTF-8
is refused naming the file, the row and the column (`InputError`). Rows are numbered as a person
finds them: a CSV's as a spreadsheet shows them (the header is row 1, the first record row 2),
a JSONL file's by their line, a Parquet file's and a dataset's from 1.

A record-per-line JSONL file is told apart from a Batch JSONL job by its first line
(`is_batch_jsonl`): a Batch request has a `custom_id` and a `body`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swarm_tui.core.errors import InputError
from swarm_tui.util.textfile import read_job_lines

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "TABLE_SUFFIXES",
    "Column",
    "TableFile",
    "is_batch_jsonl",
    "kind_of_value",
    "wider_kind",
    "is_dataset_dir",
    "open_table",
    "require_pyarrow",
]

TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl")
"""The extensions a table job's file may have (a dataset is a directory)."""
BATCH_ROWS = 4096
"""Rows decoded at a time (Parquet, a dataset): a batch's Python objects, never the file's."""
CSV_BLOCK = 1 << 20
"""Bytes of a CSV parsed at a time."""

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Column:
    """A column of the input, as the export gives it back: its name and the kind of its values
    (`string`, `integer`, `float`, `boolean`, or `other`: kept as text)."""

    name: str
    kind: str = "string"

    def to_meta(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind}


def require_pyarrow(path: Path | str, what: str = "a table job") -> None:
    """`InputError` (exit 2, nothing sent) naming the extra when pyarrow is not installed.

    Arrow's buffers come from the C allocator (unless `ARROW_DEFAULT_MEMORY_POOL` says otherwise):
    mimalloc, pyarrow's default, keeps what a reader freed, and its first use costs some: 38 MB
    more RSS for the whole run after reading a million-row Parquet file, against 3 MB. Said before
    pyarrow is first imported, else (it was imported already) set from now on."""
    chosen = os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    try:
        import pyarrow as pa
    except ImportError:
        raise InputError.single(path, "job", f"{what} needs pyarrow: pip install 'swarm-tui[data]'") from None
    if chosen == "system" and pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())


def is_dataset_dir(path: Path) -> bool:
    """A directory `datasets.Dataset.save_to_disk` (or `DatasetDict.save_to_disk`) wrote."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def is_batch_jsonl(path: Path) -> bool:
    """Whether a `.jsonl` file is a Batch API job (its first request line has `custom_id` and
    `body`) rather than one record a line. A first line that is not a JSON object counts as Batch:
    its checks name what is wrong with it."""
    for _, raw in read_job_lines(path):
        if not raw.strip():
            continue
        try:
            first = json.loads(raw)
        except ValueError:
            return True
        return not isinstance(first, dict) or ("custom_id" in first and "body" in first)
    return True


class TableFile:
    """A table read a batch of rows at a time (`rows()`); its `columns`, in order (a JSONL
    file's: every key its records have, found as they are read)."""

    def __init__(self, path: Path, kind: str, columns: list[Column]) -> None:
        self.path = path
        self.kind = kind
        """`csv`, `parquet`, `jsonl` or `dataset`."""
        self.columns = columns
        self.first_row = 2 if kind == "csv" else 1
        """The number of the first record (a CSV's header is row 1)."""

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def rows(self) -> Iterator[tuple[int, Row]]:
        """(row number, {column: value}) of every row in order; `InputError` at the first row
        that cannot be read (named with its row and, when known, its column)."""
        if self.kind == "csv":
            yield from self._csv_rows()
        elif self.kind == "parquet":
            yield from self._numbered(self._parquet_batches())
        elif self.kind == "dataset":
            yield from self._numbered(self._dataset_batches())
        else:
            yield from self._jsonl_rows()

    def _numbered(self, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, Row]]:
        number = self.first_row
        for batch in batches:
            for row in batch.to_pylist():
                yield number, row
                number += 1

    # ----------------------------------------------------------------- each format

    def _parquet_batches(self) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        try:  # read through a buffer, a page at a time: never a whole row group (a million rows) at once
            parquet = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=CSV_BLOCK)
            yield from parquet.iter_batches(batch_size=BATCH_ROWS, use_threads=False)
        except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
            raise _unreadable(self.path, "parquet", exc) from None

    def _dataset_batches(self) -> Iterator[pa.RecordBatch]:
        import pyarrow.ipc as ipc

        for shard in _dataset_shards(self.path):
            try:
                with ipc.open_stream(shard) as reader:
                    yield from reader
            except (OSError, ValueError) as exc:
                raise _unreadable(shard, "dataset", exc) from None

    def _csv_rows(self) -> Iterator[tuple[int, Row]]:
        """A CSV's rows, each value its text exactly (no type guessed: `007` stays `007`), read as
        bytes and checked as UTF-8 a column at a time."""
        import pyarrow as pa

        invalid: list[Any] = []
        reader = _open_csv(self.path, self.names, invalid)
        number = self.first_row
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except (OSError, ValueError) as exc:
                raise _csv_error(self.path, exc, invalid) from None
            texts = []
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                try:
                    texts.append(column.cast(pa.string()).to_pylist())
                except (ValueError, pa.ArrowInvalid):
                    raise _not_utf8(self.path, number, name, column.to_pylist()) from None
            names = batch.schema.names
            for values in zip(*texts, strict=True):
                yield number, dict(zip(names, values, strict=True))
                number += 1

    def _jsonl_rows(self) -> Iterator[tuple[int, Row]]:
        """A record JSONL file's records; its columns grow as keys are met, and a column whose
        values are of several kinds becomes `other` (integers and floats: `float`)."""
        position = {name: i for i, name in enumerate(self.names)}
        only_null: set[str] = set()
        for lineno, raw in read_job_lines(self.path):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as exc:
                raise InputError.single(self.path, "json", f"not JSON: {exc}", line=lineno) from None
            if not isinstance(record, dict):
                raise InputError.single(
                    self.path, "record", f"expected a JSON object (a record), not {type(record).__name__}", line=lineno
                )
            for key, value in record.items():
                kind = kind_of_value(value)
                at = position.get(key)
                if at is None:
                    position[key] = len(self.columns)
                    self.columns.append(Column(key, kind or "string"))
                    if kind is None:
                        only_null.add(key)
                elif kind is None or self.columns[at].kind == kind:
                    continue
                elif key in only_null:
                    only_null.discard(key)
                    self.columns[at] = Column(key, kind)
                else:
                    self.columns[at] = Column(key, wider_kind(self.columns[at].kind, kind))
            yield lineno, record


def open_table(path: Path) -> TableFile:
    """The table at `path`, its columns read from its header or schema; `InputError` when it is
    not the table its name says (a `.parquet` that is not one, a CSV without a header)."""
    require_pyarrow(path)
    if not path.exists():
        raise InputError.single(path, "job", "file not found")
    if path.is_dir():
        if not is_dataset_dir(path):
            raise InputError.single(path, "job", "is a directory, not a job file (nor a dataset: see save_to_disk)")
        return TableFile(path, "dataset", _dataset_columns(path))
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return TableFile(path, "parquet", _parquet_columns(path))
    if suffix == ".csv":
        return TableFile(path, "csv", _csv_columns(path))
    if suffix == ".jsonl":
        return TableFile(path, "jsonl", [])
    raise InputError.single(path, "job", f"not a table: {path.suffix!r} (use .csv, .parquet, .jsonl or a dataset)")


def _parquet_columns(path: Path) -> list[Column]:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError) as exc:
        raise _unreadable(path, "parquet", exc) from None
    return _columns_of(schema)


def _dataset_columns(path: Path) -> list[Column]:
    import pyarrow.ipc as ipc

    shards = _dataset_shards(path)
    try:
        with ipc.open_stream(shards[0]) as reader:
            return _columns_of(reader.schema)
    except (OSError, ValueError) as exc:
        raise _unreadable(shards[0], "dataset", exc) from None


def _dataset_shards(path: Path) -> list[Path]:
    """The Arrow files of a dataset `save_to_disk` wrote, in order (its `state.json`)."""
    if (path / "dataset_dict.json").is_file() and not (path / "state.json").is_file():
        try:
            splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8")).get("splits") or []
        except (OSError, ValueError, AttributeError):
            splits = []
        names = ", ".join(str(path / split) for split in splits) or "a split's directory"
        raise InputError.single(path, "dataset", f"holds several splits: name one ({names})")
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        files = [path / entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError.single(path / "state.json", "dataset", f"not a dataset's state ({exc})") from None
    if not files:
        raise InputError.single(path / "state.json", "dataset", "names no data file")
    return files


def _csv_columns(path: Path) -> list[Column]:
    """A CSV's header: its column names (every value is text)."""
    import pyarrow.csv as csv

    try:
        reader = csv.open_csv(
            path,
            read_options=csv.ReadOptions(block_size=CSV_BLOCK, use_threads=False),
            parse_options=csv.ParseOptions(invalid_row_handler=lambda row: "skip"),
        )
        names = list(reader.schema.names)
        reader.close()
    except (OSError, ValueError) as exc:  # the header (row 1) cannot be read: not UTF-8, no header
        raise _unreadable(path, "csv", exc, line=1) from None
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise InputError.single(path, duplicated[0], "the header names this column twice", line=1)
    return [Column(name) for name in names]


def _open_csv(path: Path, names: list[str], invalid: list[Any]) -> Any:
    """A streaming reader of a CSV's records, every column as bytes; a row with the wrong number
    of fields stops it (`invalid` says which: its line, with one reading thread)."""
    import pyarrow as pa
    import pyarrow.csv as csv

    def refuse(row: Any) -> str:
        invalid.append(row)
        return "error"

    try:
        return csv.open_csv(
            path,
            read_options=csv.ReadOptions(block_size=CSV_BLOCK, use_threads=False),
            parse_options=csv.ParseOptions(invalid_row_handler=refuse),
            convert_options=csv.ConvertOptions(column_types=dict.fromkeys(names, pa.binary())),
        )
    except (OSError, ValueError) as exc:  # the first block is read as the reader opens
        raise _csv_error(path, exc, invalid) from None


def _csv_error(path: Path, exc: BaseException, invalid: list[Any]) -> InputError:
    """A CSV that stopped being read: a row of the wrong width (its line), or why else."""
    if not invalid:
        return _unreadable(path, "csv", exc)
    bad = invalid[0]
    return InputError.single(
        path,
        "csv",
        f"expected {bad.expected_columns} fields, found {bad.actual_columns}: {bad.text[:80]!r}",
        line=bad.number,
    )


def _columns_of(schema: pa.Schema) -> list[Column]:
    import pyarrow.types as types

    columns = []
    for field in schema:
        kind = "other"
        if types.is_string(field.type) or types.is_large_string(field.type):
            kind = "string"
        elif types.is_integer(field.type):
            kind = "integer"
        elif types.is_floating(field.type):
            kind = "float"
        elif types.is_boolean(field.type):
            kind = "boolean"
        columns.append(Column(field.name, kind))
    return columns


def kind_of_value(value: Any) -> str | None:
    """A JSON value's kind (None for null: it fits any column)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "string" if isinstance(value, str) else "other"


def wider_kind(kind: str, other: str) -> str:
    """The kind of a column holding values of both kinds."""
    if {kind, other} == {"integer", "float"}:
        return "float"
    return "other"


def _unreadable(path: Path, kind: str, exc: BaseException, line: int | None = None) -> InputError:
    names = {"parquet": "a Parquet file", "csv": "a readable CSV file", "dataset": "an Arrow file of a dataset"}
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return InputError.single(path, kind, f"not {names.get(kind, kind)}: {reason}", line=line)


def _not_utf8(path: Path, first: int, column: str, values: list[bytes | None]) -> InputError:
    """The first value of a batch's column that is not UTF-8: its row, its column, the byte."""
    for offset, value in enumerate(values):
        if value is None:
            continue
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as exc:
            return InputError.single(
                path,
                column,
                f"not UTF-8 text: byte 0x{value[exc.start]:02x} at character {exc.start + 1} of the value "
                f"({exc.reason}); save the file as UTF-8",
                line=first + offset,
            )
    return InputError.single(path, column, "not UTF-8 text; save the file as UTF-8", line=first)
