"""The OpenAPI document: problem documents for every error, security schemes, strict bodies.

Bodies are parsed by the app itself (strict JSON, see `uda.http.app`), so their schemas are
added here; every 4xx/5xx response is declared as `application/problem+json` with the
`Problem` schema, which is what the service sends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ontology import Sensitivity, knowledge_asset_types, relation_types
from ontology.elements import SCOPE_PATTERN
from uda.http.problems import Problem
from uda.http.wire import API_KEY_HEADER, ARROW_STREAM, PROBLEM_JSON

_REF = "#/components/schemas/{model}"
# What `uda.query.clearance.Clearance.parse` accepts, from the same sources.
CLEARANCE_ENTRY = (
    "^("
    + "|".join(level.value for level in Sensitivity)
    + r"|project:\*|"
    + SCOPE_PATTERN.pattern.strip("^$")
    + ")$"
)

# The statuses every authenticated JSON route may answer with a problem document.
PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: {"description": "malformed JSON"},
    401: {"description": "missing or invalid credentials"},
    413: {"description": "request body too large"},
    415: {"description": "the body is not JSON"},
    422: {"description": "invalid request; `field` names the field"},
    500: {"description": "internal error (generic message and request id)"},
    502: {"description": "a backend failed (generic message and request id)"},
}

ARROW_RESPONSE: dict[str, Any] = {
    "description": "results as JSON, or as an Arrow IPC stream in the documented result "
    "schema (plan, explanation and clearance in the schema metadata)",
    "content": {ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}}},
}

_body_models: dict[str, type[BaseModel]] = {}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` declaring a required JSON body of `model`."""
    _body_models[model.__name__] = model
    ref = {"$ref": _REF.format(model=model.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def _tighten_search_request(properties: dict[str, Any]) -> None:
    """Say in the document what the planner checks, so that generated clients know it too.

    Only the closed vocabularies are added (clearance entries, searchable types, relations, the
    HLC range); filters stay free-form, since their fields depend on the element types.
    """
    entry = {"type": "string", "pattern": CLEARANCE_ENTRY}
    if "clearance_scope" in properties:
        properties["clearance_scope"]["items"] = entry
    for name, values in (
        ("element_types", knowledge_asset_types()),
        ("relations", relation_types()),
    ):
        for option in properties.get(name, {}).get("anyOf", []):
            if option.get("type") == "array":
                option["items"] = {"type": "string", "enum": list(values)}
    for option in properties.get("as_of", {}).get("anyOf", []):
        if option.get("type") == "integer":
            option.update(minimum=0, maximum=(1 << 63) - 1)


def install_openapi(app: FastAPI) -> None:
    """Replace the app's OpenAPI generator by one that post-processes FastAPI's document."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        components: dict[str, Any] = document.setdefault("components", {})
        schemas: dict[str, Any] = components.setdefault("schemas", {})
        models: list[type[BaseModel]] = [Problem, *_body_models.values()]
        _, extra = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
        for name, schema in extra.get("$defs", {}).items():
            schemas.setdefault(name, schema)
        for name in ("SearchRequest", "ExportRequest"):
            _tighten_search_request(schemas.get(name, {}).get("properties", {}))
        components["securitySchemes"] = {
            "apiKey": {"type": "apiKey", "in": "header", "name": API_KEY_HEADER},
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
        }
        problem = {PROBLEM_JSON: {"schema": {"$ref": _REF.format(model="Problem")}}}
        for path, operations in document.get("paths", {}).items():
            for operation in operations.values():
                if path.startswith("/v1/"):
                    operation["security"] = [{"apiKey": []}, {"bearer": []}]
                for status, response in operation.get("responses", {}).items():
                    if str(status)[0] in "45" and not (path == "/readyz" and status == "503"):
                        response["content"] = problem
                        response.setdefault("description", "a problem document")
        app.openapi_schema = document
        return document

    app.openapi = openapi  # FastAPI's documented way to customise the document
