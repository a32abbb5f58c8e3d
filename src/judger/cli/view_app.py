"""The ``judger view`` web app: JSON endpoints over one :class:`RolloutIndex` (and a second one to
compare against), and the static page that reads them. Served on 127.0.0.1 only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from judger.cli.view_index import VERDICTS, RolloutIndex, diff

ASSETS = Path(__file__).parent / "view_assets"
MAX_PAGE = 500


def _sample_id(index: RolloutIndex, sample: int) -> int:
    if not 0 <= sample < index.n:
        raise HTTPException(404, f"no sample {sample}: the file has {index.n}")
    return sample


def create_app(index: RolloutIndex, other: RolloutIndex | None = None) -> FastAPI:
    """The app over ``index``; with ``other``, ``/api/diff`` pairs their samples."""
    app = FastAPI(title="judger view", docs_url=None, redoc_url=None, openapi_url=None)
    # only pages of this server may read it: a site whose name is rebound to 127.0.0.1 is refused
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"])
    pairs: tuple[np.ndarray, np.ndarray] | None = diff(index, other) if other is not None else None

    def which(file: int) -> RolloutIndex:
        if file == 0:
            return index
        if file == 1 and other is not None:
            return other
        raise HTTPException(404, f"no file {file}")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(ASSETS / "index.html", media_type="text/html")

    app.mount("/assets", StaticFiles(directory=ASSETS), name="assets")

    @app.get("/api/meta")
    def meta() -> dict[str, Any]:
        files = [index] if other is None else [index, other]
        return {
            "files": [
                {"path": str(f.path), "samples": f.n, "groups": f.n_groups, "scored_on_load": f.scored}
                for f in files
            ],
            "data_sources": index.sources,
            "verdicts": list(VERDICTS),
            "diff": pairs is not None,
        }

    @app.get("/api/summary")
    def summary(file: int = 0) -> dict[str, Any]:
        f = which(file)
        return {"summary": f.summary, "failure_reasons": f.failure_reasons(), "plots": f.plots()}

    @app.get("/api/samples")
    def samples(
        file: int = 0,
        source: str | None = None,
        verdict: str | None = None,
        min_score: float | None = None,
        max_score: float | None = None,
        q: str | None = None,
        sort: str = "row",
        offset: int = Query(0, ge=0),
        limit: int = Query(50, ge=1, le=MAX_PAGE),
    ) -> dict[str, Any]:
        f = which(file)
        if verdict and verdict not in VERDICTS:
            raise HTTPException(422, f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        if source and source not in f.sources:
            raise HTTPException(422, f"no data_source {source!r} in {f.path}")
        # the verdict counts are those of the other filters, so each verdict button shows its count
        base = f.mask(source=source, min_score=min_score, max_score=max_score, query=q)
        keep = base & (f.verdict == VERDICTS.index(verdict)) if verdict else base
        try:
            ordered = f.order(np.flatnonzero(keep), sort)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        page = ordered[offset : offset + limit]
        return {
            "total": len(ordered),
            "counts": f.counts(base),
            "offset": offset,
            "items": [f.item(int(i)) for i in page],
        }

    @app.get("/api/sample/{sample}")
    def sample(sample: int, file: int = 0) -> dict[str, Any]:
        f = which(file)
        return f.detail(_sample_id(f, sample))

    @app.get("/api/group/{sample}")
    def group(sample: int, file: int = 0) -> dict[str, Any]:
        """The N responses of the prompt of ``sample``, in file order."""
        f = which(file)
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

    @app.get("/api/diff")
    def differs(offset: int = Query(0, ge=0), limit: int = Query(50, ge=1, le=MAX_PAGE)) -> dict[str, Any]:
        if pairs is None or other is None:
            raise HTTPException(404, "judger view was given one file: no diff")
        left, right = pairs
        flips: dict[str, int] = {}
        for i, j in zip(left, right):
            name = f"{VERDICTS[index.verdict[i]]}->{VERDICTS[other.verdict[j]]}"
            flips[name] = flips.get(name, 0) + 1
        return {
            "total": len(left),
            "prompts": len(set(index.group[left].tolist())),
            "flips": flips,
            "offset": offset,
            "items": [
                {"a": index.item(int(i)), "b": other.item(int(j))}
                for i, j in zip(left[offset : offset + limit], right[offset : offset + limit])
            ],
        }

    return app
