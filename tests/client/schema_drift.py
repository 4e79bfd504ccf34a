"""Compare the client's models with the service's OpenAPI document, operation by operation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from app.main import create_app
from app.settings import Settings

Schema = dict[str, Any]


def openapi(settings: Settings) -> Schema:
    document: Schema = create_app(settings).openapi()
    return document


def operation(document: Schema, method: str, path: str) -> Schema | None:
    found: Schema | None = document["paths"].get(path, {}).get(method.lower())
    return found


def _resolve(schema: Schema, defs: Schema) -> Schema:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _variants(schema: Schema, defs: Schema) -> list[Schema]:
    schema = _resolve(schema, defs)
    parts: list[Schema] = schema.get("anyOf") or schema.get("oneOf") or []
    if parts:
        return [v for part in parts for v in _variants(part, defs)]
    return [schema]


def _kind(schema: Schema) -> str:
    if "properties" in schema:
        return "object-model"
    if "enum" in schema:
        return "enum:" + ",".join(sorted(map(str, schema["enum"])))
    if "const" in schema:
        return f"enum:{schema['const']}"
    return str(schema.get("type", "any"))


def _kinds(schema: Schema, defs: Schema, *, ignore_null: bool) -> set[str]:
    kinds = {_kind(variant) for variant in _variants(schema, defs)}
    if ignore_null:
        kinds.discard("null")
    return kinds


def _models(schema: Schema, defs: Schema) -> list[Schema]:
    return [v for v in _variants(schema, defs) if "properties" in v]


def _items(schema: Schema, defs: Schema) -> list[Schema]:
    return [
        v["items"] for v in _variants(schema, defs) if v.get("type") == "array" and "items" in v
    ]


def compare(
    client: Schema,
    client_defs: Schema,
    server: Schema,
    server_defs: Schema,
    *,
    reply: bool,
    where: str,
    optional: frozenset[str] = frozenset(),
) -> list[str]:
    """Differences between a client object schema and the server's: a reply must name exactly
    the server's fields (those in `optional` may be missing there); a request may send only
    fields the server takes. Types must agree."""
    problems: list[str] = []
    ours, theirs = client.get("properties", {}), server.get("properties", {})
    if reply and set(ours) - (optional - set(theirs)) != set(theirs):
        problems.append(f"{where}: fields {sorted(ours)} != server's {sorted(theirs)}")
    if not reply and not set(ours) <= set(theirs):
        problems.append(
            f"{where}: sends {sorted(set(ours) - set(theirs))} the server does not take"
        )
    for name in sorted(set(ours) & set(theirs)):
        problems += _compare_field(
            ours[name],
            client_defs,
            theirs[name],
            server_defs,
            reply=reply,
            where=f"{where}.{name}",
            optional=optional,
        )
    return problems


def _compare_field(
    ours: Schema,
    client_defs: Schema,
    theirs: Schema,
    server_defs: Schema,
    *,
    reply: bool,
    where: str,
    optional: frozenset[str],
) -> list[str]:
    mine = _kinds(ours, client_defs, ignore_null=not reply)
    server = _kinds(theirs, server_defs, ignore_null=not reply)
    # A reply: the client accepts whatever the server may send (a null it never gets is fine).
    # A request: the server takes whatever the client sends (the client never sends null).
    fits = server <= mine if reply else mine <= server
    wildcard = "any" in mine or "any" in server  # JsonValue on either side
    if not fits and not wildcard:
        return [f"{where}: client {sorted(mine)} != server {sorted(server)}"]
    problems: list[str] = []
    for sub_ours, sub_theirs in zip(
        _models(ours, client_defs), _models(theirs, server_defs), strict=False
    ):
        problems += compare(
            sub_ours,
            client_defs,
            sub_theirs,
            server_defs,
            reply=reply,
            where=where,
            optional=optional,
        )
    for item_ours, item_theirs in zip(
        _items(ours, client_defs), _items(theirs, server_defs), strict=False
    ):
        problems += _compare_field(
            item_ours,
            client_defs,
            item_theirs,
            server_defs,
            reply=reply,
            where=f"{where}[]",
            optional=optional,
        )
    return problems


def _client_schema(model: type[BaseModel], *, reply: bool) -> tuple[Schema, Schema]:
    mode: Literal["validation", "serialization"] = "validation" if reply else "serialization"
    schema = model.model_json_schema(by_alias=True, mode=mode, ref_template="#/$defs/{model}")
    return schema, schema.get("$defs", {})


def _body_schema(op: Schema, *, reply: bool) -> Schema | None:
    if reply:
        for status in ("200", "201", "202"):
            content = op.get("responses", {}).get(status, {}).get("content", {})
            if "application/json" in content:
                found: Schema = content["application/json"]["schema"]
                return found
        return None
    content = op.get("requestBody", {}).get("content", {})
    body: Schema | None = content.get("application/json", {}).get("schema")
    return body


def drift(
    document: Schema,
    method: str,
    path: str,
    model: type[BaseModel],
    *,
    reply: bool,
    optional: frozenset[str] = frozenset(),
) -> list[str]:
    """What differs between `model` and the request (or reply) body of one operation."""
    op = operation(document, method, path)
    if op is None:
        return [f"{method} {path}: no such operation"]
    server = _body_schema(op, reply=reply)
    if server is None:
        return [f"{method} {path}: no JSON {'reply' if reply else 'body'}"]
    defs = document.get("components", {}).get("schemas", {})
    client, client_defs = _client_schema(model, reply=reply)
    where = f"{method} {path} {'reply' if reply else 'body'}"
    server = _resolve(server, defs)
    return compare(client, client_defs, server, defs, reply=reply, where=where, optional=optional)


def parameter_drift(document: Schema, method: str, path: str, names: set[str]) -> list[str]:
    """Query parameters the client sends that the operation does not declare."""
    op = operation(document, method, path)
    if op is None:
        return [f"{method} {path}: no such operation"]
    declared = {p["name"] for p in op.get("parameters", []) if p.get("in") == "query"}
    unknown = names - declared
    return [f"{method} {path}: unknown query parameters {sorted(unknown)}"] if unknown else []
