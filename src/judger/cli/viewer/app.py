"""The ``judger view`` web app: JSON endpoints over one file's index (and a second one to compare
against), and the static page that reads them. Served on 127.0.0.1 only.

While a file is being indexed the endpoints answer from what is indexed so far (the first rows),
and say so: ``complete`` is false and ``/api/meta`` tells the phase, until the whole file is.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from judger.cli.viewer import ASSETS
from judger.cli.viewer.identity import FileChanged
from judger.cli.viewer.index import VERDICTS, RolloutIndex, diff
from judger.cli.viewer.live import IndexUnavailable, LiveIndex

MAX_PAGE = 500


class Files:
    """The file viewed and the one it is compared with, as the endpoints reach them."""

    def __init__(self, index: LiveIndex, other: LiveIndex | None) -> None:
        self.index, self.other = index, other
        self._pairs: tuple[np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def all(self) -> list[LiveIndex]:
        return [self.index] if self.other is None else [self.index, self.other]

    @property
    def complete(self) -> bool:
        return all(live.complete for live in self.all)

    def which(self, file: int) -> RolloutIndex:
        """The index of file ``file`` (0: the first), as far as it is built."""
        if file == 0:
            return self.index.current()
        if file == 1 and self.other is not None:
            return self.other.current()
        raise HTTPException(404, f"no file {file}")

    def pairs(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The samples whose verdict differs between the two files; None until both are indexed."""
        if self.other is None or not self.complete:
            return None
        with self._lock:
            if self._pairs is None:
                self._pairs = diff(self.index.current(), self.other.current())
            return self._pairs


def _sample_id(index: RolloutIndex, sample: int) -> int:
    if not 0 <= sample < index.n:
        raise HTTPException(404, f"no sample {sample}: the file has {index.n}")
    return sample


def create_app(index: RolloutIndex | LiveIndex, other: RolloutIndex | LiveIndex | None = None) -> FastAPI:
    """The app over ``index``; with ``other``, ``/api/diff`` pairs their samples. An index given
    whole is served as complete; a :class:`LiveIndex` as far as it is built."""
    files = Files(_live(index), _live(other) if other is not None else None)
    app = FastAPI(title="judger view", docs_url=None, redoc_url=None, openapi_url=None)
    # only pages of this server may read it: a site whose name is rebound to 127.0.0.1 is refused
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"])
    app.add_exception_handler(IndexUnavailable, _unavailable)
    app.add_exception_handler(FileChanged, _changed)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(ASSETS / "index.html", media_type="text/html")

    app.mount("/assets", StaticFiles(directory=ASSETS), name="assets")
    app.include_router(_overview(files))
    app.include_router(_samples(files))
    app.include_router(_diff(files))
    return app


def _live(index: RolloutIndex | LiveIndex) -> LiveIndex:
    return index if isinstance(index, LiveIndex) else LiveIndex(index.path, index)


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=503)


async def _changed(request: Request, exc: Exception) -> JSONResponse:
    # the index's verdicts and the file's rows are no longer a pair: said, never served mixed
    return JSONResponse({"detail": str(exc), "changed": True}, status_code=409)


def _overview(files: Files) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/meta")
    def meta() -> dict[str, Any]:
        shown = files.index.peek()
        return {
            "files": [live.status() for live in files.all],
            "complete": files.complete,
            "data_sources": shown.sources if shown is not None else [],
            "verdicts": list(VERDICTS),
            "diff": files.other is not None,
        }

    @router.get("/summary")
    def summary(file: int = 0) -> dict[str, Any]:
        f = files.which(file)
        return {
            "summary": f.summary,
            "failure_reasons": f.failure_reasons(),
            "plots": f.plots(),
            "complete": files.all[file].complete,
        }

    return router


def _samples(files: Files) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/samples")
    def samples(
        file: int = 0,
        source: str | None = None,
        verdict: str | None = None,
        min_score: float | None = None,
        max_score: float | None = None,
        q: str | None = None,
        truncated: bool | None = None,
        sort: str = "row",
        offset: int = Query(0, ge=0),
        limit: int = Query(50, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        f = files.which(file)
        if verdict and verdict not in VERDICTS:
            raise HTTPException(422, f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        if source and source not in f.sources and files.all[file].complete:
            raise HTTPException(422, f"no data_source {source!r} in {f.path}")
        # the verdict counts are those of the other filters, so each verdict button shows its count;
        # the truncated count likewise
        base = f.mask(source=source, min_score=min_score, max_score=max_score, query=q)
        of_verdict = base & (f.verdict == VERDICTS.index(verdict)) if verdict else base
        of_finish = base & (f.truncated == truncated) if truncated is not None else base
        keep = of_verdict & of_finish
        try:
            ordered = f.order(np.flatnonzero(keep), sort)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        page = ordered[offset : offset + limit]
        return {
            "total": len(ordered),
            "counts": f.counts(of_finish),
            "truncated": int(np.count_nonzero(f.truncated[of_verdict])),
            "offset": offset,
            "items": [f.item(int(i)) for i in page],
            "complete": files.all[file].complete,
        }

    @router.get("/sample/{sample}")
    def sample(sample: int, file: int = 0) -> dict[str, Any]:
        f = files.which(file)
        return f.detail(_sample_id(f, sample))

    @router.get("/group/{sample}")
    def group(sample: int, file: int = 0) -> dict[str, Any]:
        """The N responses of the prompt of ``sample``, in file order."""
        f = files.which(file)
        members = f.group_members(_sample_id(f, sample))
        details = [f.detail(int(i)) for i in members]
        first = details[0]
        return {
            "group": first["group"],
            "data_source": first["data_source"],
            "messages": first["messages"],
            "ground_truth": first["ground_truth"],
            "n": len(details),
            "right": sum(d["verdict"] == "right" for d in details),
            "samples": details,
        }

    return router


def _diff(files: Files) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/diff")
    def differs(offset: int = Query(0, ge=0), limit: int = Query(50, ge=1, le=MAX_PAGE)) -> dict[str, Any]:
        if files.other is None:
            raise HTTPException(404, "judger view was given one file: no diff")
        pairs = files.pairs()
        if pairs is None:  # paired once both files are indexed whole
            return {"complete": False, "total": 0, "prompts": 0, "flips": {}, "offset": offset, "items": []}
        index, other = files.index.current(), files.other.current()
        left, right = pairs
        codes, counts = np.unique(
            index.verdict[left].astype(np.int64) * len(VERDICTS) + other.verdict[right], return_counts=True
        )
        flips = {
            f"{VERDICTS[c // len(VERDICTS)]}->{VERDICTS[c % len(VERDICTS)]}": int(n)
            for c, n in zip(codes.tolist(), counts)
        }
        return {
            "complete": True,
            "total": len(left),
            "prompts": len(set(index.group[left].tolist())),
            "flips": flips,
            "offset": offset,
            "items": [
                {"a": index.item(int(i)), "b": other.item(int(j))}
                for i, j in zip(left[offset : offset + limit], right[offset : offset + limit])
            ],
        }

    return router
