"""Reading and writing rollouts: JSONL or Parquet files in verl's row layout, or RolloutState JSON lines.

A verl row holds ``data_source``, ``prompt`` (chat messages, or a plain string), ``response`` (one
string) or ``responses`` (a list: one sample each), ``reward_model.ground_truth``, ``extra_info`` and
optionally ``uid`` (the prompt group). It becomes one :class:`RolloutState` per response:
``prompt`` -> ``message``, ``uid`` -> ``group_id`` (a ``responses`` row without one is its own group),
``extra_info`` -> ``extra_fields["extra_info"]`` (passed on to reward handlers), any other column ->
``extra_fields["columns"]`` (written back unchanged). Rows read from a file are finished rollouts,
so their status is COMPLETED unless the row says otherwise (``"init"``, a dump's default, counts as
not saying).

A JSON line with a ``message`` field and no ``prompt`` is read as a RolloutState dump.

A row that cannot be read does not stop the others: it becomes a :class:`RowError` naming its row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from judger.core.errors import InputError
from judger.core.outputs import finite_number
from judger.core.rollout import RolloutState, Status, fields_builder
from judger.trainer.verl_row import decode_nested as decode_nested
from judger.trainer.verl_row import messages_of as messages_of
from judger.trainer.verl_row import read_verl_row

Layout = Literal["verl", "state"]

# columns of a verl row that map onto RolloutState fields; everything else rides along untouched
_VERL_COLUMNS = {
    "data_source",
    "prompt",
    "response",
    "responses",
    "reward_model",
    "extra_info",
    "uid",
    "status",
}
_OUTPUT_COLUMNS = {"reward", "score", "error_msg", "judge_failure"}
# verl's rollout_data_dir dump: the columns that map onto a verl row, and its old score
_DUMP_COLUMNS = {"input", "output", "gts", "score"}


@dataclass(frozen=True, slots=True)
class RowError:
    """One input row that could not be turned into rollouts. ``row`` counts from 1 (line number)."""

    row: int
    message: str

    def __str__(self) -> str:
        return f"row {self.row}: {self.message}"


@dataclass
class Rollouts:
    """What :func:`read_rollouts` gives: the states, the rows that failed, and each state's row."""

    states: list[RolloutState] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    layout: Layout = "verl"


def _format(path: Path) -> Literal["jsonl", "parquet"]:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".parquet", ".pq"):
        return "parquet"
    if suffixes and suffixes[-1] in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise InputError(f"{path}: unknown format {path.suffix!r}; use .jsonl (JSON lines) or .parquet")


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Any | RowError]]:
    # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the first row
    with path.open("r", encoding="utf-8-sig", errors="replace") as fh:
        yield from json_rows(fh, path)


# json.loads' own C scanner, called without the Python steps around it (a type check, two whitespace
# matches, two calls): for rows of a few kB those steps are about a fifth of decoding
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(line: str) -> Any:
    """``json.loads(line)`` for a line of JSON lines: the value, or json.loads' own error."""
    try:
        value, end = _scan_once(line, 0)
    except StopIteration:  # no value at column 1 (leading space, a byte-order mark, nothing)
        return json.loads(line)
    length = len(line)
    if end == length or (end == length - 1 and line[end] == "\n"):
        return value
    return json.loads(line)  # more after the value: json.loads takes whitespace, refuses the rest


def json_rows(
    lines: Iterable[str], path: str | Path, first_number: int = 1, *, first: bool = True
) -> Iterator[tuple[int, Any | RowError]]:
    """``(line number, row or RowError)`` of JSON lines, numbered from ``first_number``; ``first``:
    these lines open the file (a JSON array there is refused with the way to convert it)."""
    for number, line in enumerate(lines, start=first_number):
        if not line or line.isspace():  # not line.strip(): that copies every line
            continue
        if first and line.lstrip().startswith("["):
            raise InputError(
                f"{path}: a JSON array, not JSON lines; use JSONL (one JSON object per line), "
                "e.g. jq -c '.[]' file.json > file.jsonl"
            )
        first = False
        try:
            yield number, _loads(line)
        except json.JSONDecodeError as exc:
            yield number, RowError(number, f"not valid JSON ({exc.msg} at column {exc.colno})")


def _iter_parquet(path: Path) -> Iterator[tuple[int, Any | RowError]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is in the io extra
        raise InputError("reading Parquet needs pyarrow: pip install 'judger[io]'") from exc
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc
    number = 0
    for batch in parquet.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            number += 1
            yield number, row


def iter_rows(path: str | Path) -> Iterator[tuple[int, Any | RowError]]:
    """``(row number from 1, row or RowError)`` of a JSONL or Parquet file; InputError if unreadable."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return _iter_parquet(path) if _format(path) == "parquet" else _iter_jsonl(path)


def _status(value: Any) -> Status:
    if value is None or value == Status.INIT.value:
        return Status.COMPLETED
    try:
        return Status(value)
    except ValueError:
        allowed = ", ".join(s.value for s in Status)
        raise ValueError(f"'status' {value!r} is not one of {allowed}") from None


def _from_verl_dump(row: dict[str, Any]) -> dict[str, Any]:
    """A line of verl's ``rollout_data_dir`` dump (``input``, ``output``, ``gts``, ``score``,
    ``step``, reward extras) as a verl row: the decoded prompt text is the prompt."""
    out = {k: v for k, v in row.items() if k not in _DUMP_COLUMNS}
    out["prompt"] = row["input"]
    out["response"] = row["output"]
    out["reward_model"] = {"ground_truth": row.get("gts")}
    out.setdefault("data_source", None)
    return out


def is_verl_dump(row: Any) -> bool:
    return isinstance(row, dict) and "input" in row and "output" in row and "prompt" not in row


def parse_row(
    row: Any, number: int, *, decoded: bool = False, require_data_source: bool = True
) -> tuple[list[RolloutState], Layout]:
    """The RolloutStates of one input row; raises ValueError saying what is wrong with it.

    ``decoded``: the row comes from a JSON or Parquet decoder, whose objects have string keys only
    (saves checking every key of every nested object). ``require_data_source=False``: a row without
    ``data_source`` (a judger that does not route on it) gets None. A line of verl's
    ``rollout_data_dir`` dump is read as the verl row it stands for. The verl columns are read by
    :func:`~judger.trainer.verl_row.read_verl_row`, as the sampler reads them.
    """
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    if "message" in row and "prompt" not in row:
        state = RolloutState.model_validate(row)
        if state.status == Status.INIT:  # a dump's default status says nothing about the rollout
            state.status = Status.COMPLETED
        return [state], "state"
    if is_verl_dump(row):
        row = _from_verl_dump(row)
    elif not require_data_source and "data_source" not in row:
        row = {**row, "data_source": None}
    fields = read_verl_row(row, need_prompt=False, need_response=True)
    responses = _responses(row)
    status = _status(row.get("status"))
    if status == Status.FAILED and row.get("judge_failure"):
        status = Status.COMPLETED  # failed at judging, not at generation: scoring again retries it
    uid = fields.uid
    if uid is not None and not isinstance(uid, (int, str)):
        uid = str(uid)
    if uid is None and "responses" in row:
        uid = f"row-{number}"
    # every value below is checked here (types, string keys), so the states skip a second validation;
    # anything else (a bool uid, a data_source of another type) is left to RolloutState's own errors
    data_source = fields.data_source
    checked = (
        (data_source is None or type(data_source) is str or type(data_source) is dict)
        and (uid is None or type(uid) in (int, str))
        and (decoded or all(map(_str_keyed, [data_source, fields.reward_model, *fields.message])))
    )
    build = RolloutState.from_checked if checked else RolloutState.model_validate
    base = {"data_source": data_source, "group_id": uid, "status": status}
    extras = _extra_fields(row, fields.extra_info, len(responses))
    return [
        build(
            {
                **base,
                # each state owns its containers, as validation's copies would give it
                "message": [dict(m) for m in fields.message] if i else fields.message,
                "reward_model": dict(fields.reward_model),
                "response": response,
                "extra_fields": extra,
            }
        )
        for i, (response, extra) in enumerate(zip(responses, extras))
    ], "verl"


# the fields a plain verl row sets (every other field keeps its default)
_PLAIN_FIELDS = ("data_source", "group_id", "status", "message", "reward_model", "response", "extra_fields")


def plain_row_reader() -> Callable[[dict[str, Any]], RolloutState | None]:
    """``read(row)``: the state :func:`parse_row` gives a decoded verl row of the common shape (one
    string ``response``, chat messages, a ``reward_model`` object, ``extra_info`` an object or
    absent, ``data_source`` and ``uid`` plain, no ``status``), built in one step; None for any other
    row, which :func:`parse_row` then reads (and refuses, if it must, in its words).

    The row is the reader's to take, as a row just decoded is: its prompt and ``reward_model``
    become the state's own (one state per row, so no other state shares them: a copy would only
    cost time)."""
    build = fields_builder(_PLAIN_FIELDS)
    skipped = _VERL_COLUMNS | _OUTPUT_COLUMNS
    completed = Status.COMPLETED

    def read(row: dict[str, Any]) -> RolloutState | None:
        response, prompt, reward_model = row.get("response"), row.get("prompt"), row.get("reward_model")
        data_source, extra_info, uid = row.get("data_source"), row.get("extra_info"), row.get("uid")
        if (
            type(response) is not str
            or type(prompt) is not list
            or type(reward_model) is not dict
            or "ground_truth" not in reward_model
            or (data_source is not None and type(data_source) is not str)
            or (extra_info is not None and type(extra_info) is not dict)
            or (uid is not None and type(uid) is not int and type(uid) is not str)
            or "data_source" not in row
            or "responses" in row
            or "status" in row
            or "message" in row
        ):
            return None
        for message in prompt:
            if type(message) is not dict:
                return None
        extra: dict[str, Any] = {} if extra_info is None else {"extra_info": extra_info}
        # the verl columns of such a row: the four checked above, and extra_info and uid if given
        if len(row) > 4 + ("extra_info" in row) + ("uid" in row):
            columns = {k: v for k, v in row.items() if k not in skipped}
            if columns:
                extra["columns"] = columns
        return build(
            {
                "data_source": data_source,
                "group_id": uid,
                "status": completed,
                "message": prompt,
                "reward_model": reward_model,
                "response": response,
                "extra_fields": extra,
            }
        )

    return read


def _responses(row: dict[str, Any]) -> list[Any]:
    """The row's responses: ``[response]``, or its ``responses`` list; each a string or None."""
    if "response" in row and "responses" in row:
        raise ValueError("has both 'response' and 'responses'; give one")
    if "responses" in row:
        responses = row["responses"]
        if hasattr(responses, "tolist"):
            responses = responses.tolist()
        if not isinstance(responses, list) or not responses:
            raise ValueError("'responses' must be a non-empty list of strings")
    else:
        responses = [row["response"]]
    for i, response in enumerate(responses):
        if response is not None and not isinstance(response, str):
            where = "'response'" if "response" in row else f"'responses'[{i}]"
            raise ValueError(f"{where} must be a string, got {type(response).__name__}")
    return responses


def _extra_fields(row: dict[str, Any], extra_info: dict[str, Any] | None, n: int) -> list[dict[str, Any]]:
    """Each response's ``extra_fields``: the row's ``extra_info``, its other columns (written back
    unchanged) and, for a ``responses`` row, the response's index."""
    columns = (
        {k: v for k, v in row.items() if k not in _VERL_COLUMNS and k not in _OUTPUT_COLUMNS}
        if len(row) > len(_VERL_COLUMNS.intersection(row))
        else None
    )
    several = "responses" in row
    out = []
    for i in range(n):
        extra: dict[str, Any] = {}
        if extra_info is not None:
            extra["extra_info"] = extra_info
        if columns:
            extra["columns"] = columns
        if several:
            extra["response_index"] = i
        out.append(extra)
    return out


def _str_keyed(value: Any) -> bool:
    """Not a dict, or a dict whose keys are all strings (what a ``dict[str, Any]`` field accepts)."""
    return type(value) is not dict or all(type(k) is str for k in value)


def _open_rows(path: str | Path) -> Iterator[tuple[int, Any | RowError]]:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a rollouts file")
    return _iter_parquet(path) if _format(path) == "parquet" else _iter_jsonl(path)


def iter_rollouts(
    path: str | Path, chunk_rows: int = 4096, *, require_data_source: bool = True
) -> Iterator[Rollouts]:
    """The file's rollouts in chunks of about ``chunk_rows`` rows, read lazily: memory holds one
    chunk, whatever the file's size. Bad rows are collected in each chunk's ``errors``; a chunk's
    ``layout`` is that of its rows ("state" only when all are RolloutState dumps).

    Raises :class:`InputError` when the file itself cannot be read (possibly after some chunks).
    """
    yield from rollouts_of(_open_rows(path), path, chunk_rows, require_data_source=require_data_source)


def rollouts_of(
    rows: Iterator[tuple[int, Any | RowError]],
    path: str | Path,
    chunk_rows: int = 4096,
    *,
    require_data_source: bool = True,
) -> Iterator[Rollouts]:
    """:func:`iter_rollouts` over rows already opened (:func:`json_rows` of lines in memory)."""
    out, layouts, seen = Rollouts(), set(), 0
    plain = plain_row_reader()
    try:
        for number, row in rows:
            seen += 1
            if isinstance(row, RowError):
                out.errors.append(row)
            elif type(row) is dict and (state := plain(row)) is not None:
                layouts.add("verl")
                out.states.append(state)
                out.rows.append(number)
            else:
                try:
                    states, layout = parse_row(
                        row, number, decoded=True, require_data_source=require_data_source
                    )
                except ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(str(p) for p in first["loc"]) or "row"
                    out.errors.append(RowError(number, f"invalid RolloutState: {where}: {first['msg']}"))
                except (ValueError, TypeError) as exc:
                    out.errors.append(RowError(number, str(exc)))
                else:
                    layouts.add(layout)
                    out.states.extend(states)
                    out.rows.extend([number] * len(states))
            if seen >= chunk_rows:
                out.layout = "state" if layouts == {"state"} else "verl"
                yield out
                out, layouts, seen = Rollouts(), set(), 0
    except UnicodeDecodeError as exc:  # pragma: no cover - errors="replace" makes this rare
        raise InputError(f"{path}: not UTF-8 text ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc})") from exc
    if seen:
        out.layout = "state" if layouts == {"state"} else "verl"
        yield out


def read_rollouts(path: str | Path, *, require_data_source: bool = True) -> Rollouts:
    """Read every row of a JSONL or Parquet file; bad rows are collected in ``errors``, not raised.

    Raises :class:`InputError` when the file itself cannot be read.
    """
    out = Rollouts()
    layouts: set[str] = set()
    for chunk in iter_rollouts(path, 1 << 62, require_data_source=require_data_source):
        out.states.extend(chunk.states)
        out.errors.extend(chunk.errors)
        out.rows.extend(chunk.rows)
        if chunk.states:
            layouts.add(chunk.layout)
    out.layout = "state" if layouts == {"state"} else "verl"
    return out


# --- writing ---------------------------------------------------------------------------------------


def state_to_row(state: RolloutState) -> dict[str, Any]:
    """A state as a verl row plus its outcome: ``reward`` (dict or null), ``score``, ``status``,
    ``error_msg`` (and ``judge_failure`` for a failed sample)."""
    row: dict[str, Any] = {"data_source": state.data_source}
    if state.group_id is not None:
        row["uid"] = state.group_id
    row["prompt"] = state.message
    row["response"] = state.response
    row["reward_model"] = state.reward_model
    if "extra_info" in state.extra_fields:
        row["extra_info"] = state.extra_fields["extra_info"]
    row.update(state.extra_fields.get("columns") or {})
    reward = state.reward
    row["reward"] = reward
    score = reward.get("score") if reward else None
    row["score"] = finite_number(score)
    row["status"] = state.status.value
    row["error_msg"] = state.error_msg
    failure = state.extra_fields.get("judge_failure")
    if failure is not None:
        row["judge_failure"] = failure
    return row


def json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def write_rollouts(path: str | Path, states: Sequence[RolloutState], layout: Layout = "verl") -> None:
    """Write every state with its reward, as JSONL or Parquet (by extension).

    ``layout="verl"`` writes verl rows (:func:`state_to_row`); ``"state"`` writes RolloutState dumps.
    """
    path = Path(path)
    fmt = _format(path)
    if layout == "state":
        rows = [s.model_dump(mode="json") for s in states]
    else:
        rows = [state_to_row(s) for s in states]
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, default=json_default))
                fh.write("\n")
        return
    write_parquet_rows(path, rows)


def write_parquet_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as one Parquet file; a column whose values disagree in type is stored as JSON text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    arrays = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            # a column whose values disagree in type (e.g. reward dicts of different judgers, a
            # ground truth that is a number here and a list there) is stored as JSON text
            arrays[name] = pa.array(
                [
                    None if v is None else json.dumps(v, ensure_ascii=False, default=json_default)
                    for v in values
                ],
                type=pa.string(),
            )
    table = pa.table(arrays) if arrays else pa.table({})
    pq.write_table(table, path)


def example_data(name: str = "math_rollouts_dev.jsonl") -> Path:
    """The path of a bundled example file (see ``judger/data/README.md``)."""
    path = Path(__file__).parent.parent / "data" / name
    if not path.is_file():
        available = sorted(p.name for p in path.parent.glob("*.jsonl"))
        raise FileNotFoundError(f"no bundled example {name!r}; available: {available}")
    return path
