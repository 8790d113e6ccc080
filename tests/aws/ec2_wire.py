"""The EC2 wire as the reference tests read it: the botocore model (the API Reference's text and shapes), a raw
SigV4-signed query call with exactly the parameters a probe names (no SDK-side validation in the way), and an XML
answer read field by field against the model's output shape."""
from __future__ import annotations

import gzip
import html
import json
import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import botocore

__all__ = ["JSON_TYPES", "MODEL_PATH", "answered", "doc_text", "error_code", "model", "model_docs", "model_type",
           "resolve_input", "signed_call"]

MODEL_PATH = Path(botocore.__file__).parent / "data/ec2/2016-11-15/service-2.json.gz"


@cache
def model() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(gzip.decompress(MODEL_PATH.read_bytes()))
    return loaded


def model_docs() -> str:
    """Every documentation string of the model, as text (what a quoted sentence is looked up in)."""
    docs: set[str] = set()
    for shape in model()["shapes"].values():
        docs.add(doc_text(shape.get("documentation")))
        docs.update(doc_text(m.get("documentation")) for m in (shape.get("members") or {}).values())
    docs.update(doc_text(op.get("documentation")) for op in model()["operations"].values())
    return "\n".join(sorted(docs))


def doc_text(raw: str | None) -> str:
    """A documentation string of the model as the API Reference renders it: HTML tags removed, blocks spaced."""
    text = re.sub(r"</?(p|li|ul|ol|note|important|br|dl|dt|dd)\b[^>]*>", " ", raw or "")
    text = re.sub(r"<[^>]+>", "", text)
    return " ".join(html.unescape(text).split())


def wire(member: str, spec: dict[str, Any]) -> str:
    loc = spec.get("locationName") or member
    return loc[0].upper() + loc[1:]


def resolve_input(op: str, flat: str) -> tuple[str, dict[str, Any]] | None:
    """The model member (its name path and spec) a flattened request parameter names, or None."""
    shapes = model()["shapes"]
    shape = shapes[model()["operations"][op]["input"]["shape"]]
    parts = flat.split(".")
    i, spec, names = 0, None, []
    while i < len(parts):
        if shape["type"] != "structure":
            return None
        found = next(((m, s) for m, s in shape["members"].items() if wire(m, s) == parts[i]), None)
        if found is None:
            return None
        member, spec = found
        names.append(member)
        shape = shapes[spec["shape"]]
        i += 1
        if shape["type"] == "list":
            if i >= len(parts) or parts[i] != "N":
                return None
            i += 1
            shape = shapes[shape["member"]["shape"]]
    return ".".join(names), spec or {}


JSON_TYPES = {"string": "string", "timestamp": "string", "blob": "string", "integer": "integer", "long": "integer",
              "boolean": "boolean", "float": "number", "double": "number", "structure": "object", "list": "array",
              "map": "object"}


def output_shape(op: str) -> dict[str, Any] | None:
    out = model()["operations"][op].get("output")
    return model()["shapes"][out["shape"]] if out else None


def xml_name(member: str, spec: dict[str, Any]) -> set[str]:
    names = {member, member[0].lower() + member[1:]}
    if spec.get("locationName"):
        names.add(spec["locationName"])
    return names


def answered(op: str, body: str) -> dict[str, str]:
    """Every leaf field of an EC2 XML answer, as ``{path: JSON type}`` by the model; a field the model does not
    have is ``{path: "?"}``. Paths use the model's member names, ``[]`` for a list item."""
    shapes = model()["shapes"]
    root = ET.fromstring(body)
    out: dict[str, str] = {}

    def local(tag: str) -> str:
        return tag.rsplit("}", 1)[-1]

    def walk(el: ET.Element, shape: dict[str, Any], path: str) -> None:
        kind = shape["type"]
        if kind == "list":
            member = shapes[shape["member"]["shape"]]
            out[path] = "array"
            for item in el:
                walk(item, member, f"{path}[]")
            return
        if kind == "structure":
            for child in el:
                name = local(child.tag)
                found = next(((m, s) for m, s in shape["members"].items() if name in xml_name(m, s)), None)
                if found is None:
                    out[f"{path}.{name}" if path else name] = "?"
                    continue
                m, s = found
                walk(child, shapes[s["shape"]], f"{path}.{m}" if path else m)
            return
        out[path] = JSON_TYPES[kind]

    shape = output_shape(op) or {"type": "structure", "members": {}}
    for child in root:
        if local(child.tag) in ("requestId", "RequestId"):
            continue
        name = local(child.tag)
        found = next(((m, s) for m, s in shape["members"].items() if name in xml_name(m, s)), None)
        if found is None:
            out[name] = "?"
            continue
        m, s = found
        walk(child, shapes[s["shape"]], m)
    return out


def model_type(op: str, path: str) -> str | None:
    """The JSON type the model gives an answer path, or None when it has no such field."""
    shapes = model()["shapes"]
    shape = output_shape(op)
    if shape is None:
        return None
    for part in path.split("."):
        is_item = part.endswith("[]")
        name = part[:-2] if is_item else part
        while part and shape["type"] == "list":
            shape = shapes[shape["member"]["shape"]]
        if shape["type"] != "structure" or name not in shape["members"]:
            return None
        shape = shapes[shape["members"][name]["shape"]]
        if is_item:
            if shape["type"] != "list":
                return None
            shape = shapes[shape["member"]["shape"]]
    return JSON_TYPES[shape["type"]]


def signed_call(url: str, action: str, params: dict[str, str], region: str = "us-east-1") -> tuple[int, str]:
    """One EC2 query call, SigV4-signed as any SDK signs it, with exactly ``params``."""
    from urllib.parse import urlencode

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    body = urlencode({"Action": action, "Version": "2016-11-15", **params})
    req = AWSRequest(method="POST", url=url + "/", data=body,
                     headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    SigV4Auth(Credentials("testing", "testing", "testing"), "ec2", region).add_auth(req)
    prepared = urllib.request.Request(url + "/", data=body.encode(), method="POST", headers=dict(req.headers))
    try:
        with urllib.request.urlopen(prepared, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def error_code(body: str) -> str | None:
    m = re.search(r"<Code>([^<]+)</Code>", body)
    return m.group(1) if m else None
