"""The server's OpenAPI document: the statuses each route answers, and the request bodies the routes
read themselves (they take raw bytes, so FastAPI cannot infer them) written in from the models."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from judger.core.rollout import RolloutState, Status
from judger.server.models import ErrorBody, GetRewardRequest, RewardRequest

FAILURE_RESPONSES: dict[int | str, dict[str, Any]] = {
    500: {"model": ErrorBody, "description": "the judger failed on this sample"},
    504: {"model": ErrorBody, "description": "the judger timed out on this sample"},
    400: {"model": ErrorBody, "description": "malformed JSON, or a Host header not served here"},
    401: {"model": ErrorBody, "description": "missing or wrong bearer token"},
    408: {"model": ErrorBody, "description": "the body did not arrive within the body timeout"},
    413: {"model": ErrorBody, "description": "request body too large"},
    422: {"model": ErrorBody, "description": "invalid body: the message names the field"},
    429: {"model": ErrorBody, "description": "this client has too many requests open"},
    503: {"model": ErrorBody, "description": "too many requests in flight; retry after Retry-After s"},
}


def request_body(model: type[Any]) -> dict[str, Any]:
    """``openapi_extra`` naming ``model`` as a route's JSON request body."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def _posted_states_schema(spec: dict[str, Any]) -> None:
    """``/judge`` takes RolloutStates as the judger may judge them: its schema says what the server
    refuses (a status other than init/completed, a posted reward or error_msg, a judge_failure),
    and that a list of them is taken too, so that the documented schema is the one enforced."""
    if "/judge" not in spec.get("paths", {}):
        return
    schemas = spec["components"]["schemas"]
    posted = copy.deepcopy(schemas["RolloutState"])
    posted["title"] = "PostedRolloutState"
    fields = posted["properties"]
    fields["status"] = {"enum": [Status.INIT.value, Status.COMPLETED.value], "default": Status.INIT.value}
    for name in ("reward", "error_msg"):
        fields[name] = {"type": "null", "default": None, "description": "written by the judger"}
    fields["extra_fields"] = {**fields["extra_fields"], "not": {"required": ["judge_failure"]}}
    schemas["PostedRolloutState"] = posted
    ref = {"$ref": "#/components/schemas/PostedRolloutState"}
    body = spec["paths"]["/judge"]["post"]["requestBody"]["content"]["application/json"]
    body["schema"] = {"anyOf": [ref, {"type": "array", "items": ref}]}


def openapi(app: FastAPI) -> dict[str, Any]:
    """``app``'s OpenAPI document, built once (install with ``app.openapi = partial(openapi, app)``)."""
    if app.openapi_schema is None:
        spec = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            description=app.description,
            routes=app.routes,
        )
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        for model in (RewardRequest, GetRewardRequest, RolloutState):
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
        _posted_states_schema(spec)
        app.openapi_schema = spec
    return app.openapi_schema
