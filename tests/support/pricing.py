"""A local AWS Price List query API (service ``pricing``, 2017-10-15) for tests, on the emulator kit.

moto does not implement the Pricing API, so ``metalfleet catalogue refresh`` is tested against this server:
boto3's ``pricing`` client with ``endpoint_url``, SigV4, the JSON 1.1 protocol (``X-Amz-Target:
AWSPriceListService.GetProducts``), answers in the real shape: ``{"FormatVersion": "aws_v1", "PriceList":
[<one JSON *string* per product: product.attributes, serviceCode, terms.OnDemand / terms.Reserved with
priceDimensions.pricePerUnit.USD, publicationDate>], "NextToken"}``, errors as ``{"__type", "Message"}``.

What it does, as the service does:

* GetProducts for ``ServiceCode`` AmazonEC2 (another code: NotFoundException), ``Filters`` of Type
  ``TERM_MATCH`` (or ``EQUALS``) on product attributes, every filter must match (another Type:
  InvalidParameterException), ``MaxResults`` (1-100, default 100) and an opaque ``NextToken`` (an unknown one:
  InvalidNextTokenException). DescribeServices for AmazonEC2.
* Its products (the default set: :data:`DEFAULT_PRODUCTS`, the emulator's own made-up figures, not AWS's)
  hold the decoys a real query meets:
  the same instance type under Windows, Dedicated tenancy, pre-installed SQL and ``capacitystatus``
  UnusedCapacityReservation / AllocatedCapacityReservation, each at another price, so a client that filters
  too little gets a wrong figure.
* A request without a SigV4 ``Authorization`` header for service ``pricing`` answers
  MissingAuthenticationTokenException (403), as AWS does.

Control (besides the kit's faults/reset/stats/requests): ``POST /_metalfleet/products`` ``{"products":
[...], "replace": false}`` adds or replaces compact product records (``instanceType``, ``regionCode``,
``on_demand``, optional ``reserved`` ``{"1yr": hourly, "3yr": hourly}``, ``operatingSystem`` Linux,
``tenancy`` Shared, ``capacitystatus`` Used, ``preInstalledSw`` NA, ``publicationDate``), ``GET
/_metalfleet/products`` lists them; a state reset restores the default set.

Run it: ``python -m metalfleet.testing.pricing --port 5056``; from Python: ``start_pricing_emulator()``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Iterable
from typing import Any

from metalfleet.testing.kit import (
    EmulatorClient,
    ErrorBody,
    Fault,
    FaultCodes,
    FaultMiddleware,
    FaultSwitch,
    StartResponse,
    run_server,
    server_parser,
)

__all__ = ["DEFAULT_PRODUCTS", "PricingEmulator", "product_document", "start_pricing_emulator"]

TARGET_PREFIX = "AWSPriceListService."
CODES = FaultCodes(throttle=Fault("ThrottlingException", 400, "Rate exceeded"),
                   server_error=Fault("InternalErrorException", 500, "An error on the server occurred during the "
                                      "processing of your request. Try again later."),
                   capacity=Fault("InternalErrorException", 500, "no capacity faults in the Pricing API"))
SWITCH = FaultSwitch(CODES)
_DEFAULTS = {"operatingSystem": "Linux", "tenancy": "Shared", "capacitystatus": "Used", "preInstalledSw": "NA",
             "licenseModel": "No License required", "publicationDate": "2026-11-01T00:00:00Z"}
_LOCATIONS = {"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
              "eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)", "ap-northeast-1": "Asia Pacific (Tokyo)"}
#: AWS's fixed term codes for on demand and for standard no-upfront 1-year / 3-year reservations.
_ON_DEMAND_CODE = "JRTCKXETXF"
_RESERVED_CODES = {"1yr": "4NA7Y494T4", "3yr": "BPH4J8HBKS"}
_HOURS = "6YS6EN2CT7"


class PricingEmulator(EmulatorClient):
    """A running pricing emulator subprocess (``products`` / ``set_products`` are its own control calls)."""

    module = "metalfleet.testing.pricing"
    title = "AWS Price List emulator"

    def set_products(self, products: list[dict[str, Any]], *, replace: bool = False) -> None:
        self.control("POST", "products", {"products": products, "replace": replace})

    def products(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.control("GET", "products")
        return result


def start_pricing_emulator(host: str = "127.0.0.1", port: int = 0, *, timeout: float = 60.0,
                           log_path: str | None = None) -> PricingEmulator:
    return PricingEmulator.start(host, port, timeout=timeout, log_path=log_path)


# -- the product documents -------------------------------------------------------------------------------
def _sku(record: dict[str, Any]) -> str:
    key = "|".join(str(record.get(k)) for k in ("instanceType", "regionCode", "operatingSystem", "tenancy",
                                                  "capacitystatus", "preInstalledSw"))
    return hashlib.sha256(key.encode()).hexdigest()[:16].upper()


def _dimension(sku: str, term: str, hourly: float, description: str) -> dict[str, Any]:
    return {f"{sku}.{term}.{_HOURS}": {
        "unit": "Hrs", "endRange": "Inf", "description": description, "appliesTo": [],
        "rateCode": f"{sku}.{term}.{_HOURS}", "beginRange": "0", "pricePerUnit": {"USD": f"{hourly:.10f}"}}}


def product_document(record: dict[str, Any]) -> dict[str, Any]:
    """One product as GetProducts returns it (before it is serialised to a string), from a compact record."""
    r = {**_DEFAULTS, **record}
    sku, region, itype, published = _sku(r), str(r["regionCode"]), str(r["instanceType"]), str(r["publicationDate"])
    attributes = {
        "instanceType": itype, "instanceFamily": "GPU instance", "regionCode": region,
        "location": _LOCATIONS.get(region, region), "locationType": "AWS Region", "servicecode": "AmazonEC2",
        "servicename": "Amazon Elastic Compute Cloud", "operatingSystem": r["operatingSystem"],
        "tenancy": r["tenancy"], "capacitystatus": r["capacitystatus"], "preInstalledSw": r["preInstalledSw"],
        "licenseModel": r["licenseModel"], "operation": "RunInstances", "usagetype": f"BoxUsage:{itype}"}
    terms: dict[str, Any] = {"OnDemand": {f"{sku}.{_ON_DEMAND_CODE}": {
        "priceDimensions": _dimension(sku, _ON_DEMAND_CODE, float(r["on_demand"]),
                                      f"${float(r['on_demand']):.3f} per On Demand {r['operatingSystem']} {itype} "
                                      "Instance Hour"),
        "sku": sku, "effectiveDate": published, "offerTermCode": _ON_DEMAND_CODE, "termAttributes": {}}}}
    reserved = {}
    for lease, hourly in (r.get("reserved") or {}).items():
        code = _RESERVED_CODES[lease]
        reserved[f"{sku}.{code}"] = {
            "priceDimensions": _dimension(sku, code, float(hourly), f"{r['operatingSystem']}/UNIX ({itype}), "
                                                                     "No Upfront"),
            "sku": sku, "effectiveDate": published, "offerTermCode": code,
            "termAttributes": {"LeaseContractLength": lease, "OfferingClass": "standard",
                               "PurchaseOption": "No Upfront"}}
    if reserved:
        terms["Reserved"] = reserved
    return {"product": {"productFamily": "Compute Instance", "attributes": attributes, "sku": sku},
            "serviceCode": "AmazonEC2", "terms": terms, "version": published[:10].replace("-", "") + "000000",
            "publicationDate": published}


def _decoys(itype: str, region: str, hourly: float) -> list[dict[str, Any]]:
    """What a too-loose query would also match: the same type under other OS, tenancy, software, capacity."""
    return [{"instanceType": itype, "regionCode": region, "on_demand": hourly * 1.5, "operatingSystem": "Windows"},
            {"instanceType": itype, "regionCode": region, "on_demand": hourly * 1.1, "tenancy": "Dedicated"},
            {"instanceType": itype, "regionCode": region, "on_demand": hourly * 1.3, "preInstalledSw": "SQL Std"},
            {"instanceType": itype, "regionCode": region, "on_demand": 0.0,
             "capacitystatus": "UnusedCapacityReservation"},
            {"instanceType": itype, "regionCode": region, "on_demand": 0.0,
             "capacitystatus": "AllocatedCapacityReservation"}]


#: The emulator's own price table (made-up figures in AWS's shape; tests set theirs with ``set_products``).
DEFAULT_PRODUCTS: tuple[dict[str, Any], ...] = (
    {"instanceType": "p5.48xlarge", "regionCode": "us-east-1", "on_demand": 50.0,
     "reserved": {"1yr": 36.0, "3yr": 25.0}},
    {"instanceType": "p5en.48xlarge", "regionCode": "us-east-1", "on_demand": 60.0, "reserved": {"1yr": 44.0}},
    {"instanceType": "p4de.24xlarge", "regionCode": "us-east-1", "on_demand": 25.0},
    {"instanceType": "p4d.24xlarge", "regionCode": "us-east-1", "on_demand": 20.0, "reserved": {"1yr": 13.0}},
    {"instanceType": "p5.48xlarge", "regionCode": "us-west-2", "on_demand": 51.0},
    *_decoys("p5.48xlarge", "us-east-1", 50.0), *_decoys("p4d.24xlarge", "us-east-1", 20.0),
)


def default_products() -> list[dict[str, Any]]:
    return [dict(r) for r in DEFAULT_PRODUCTS]


# -- the service -----------------------------------------------------------------------------------------
class PriceListService:
    """The WSGI app behind the kit's middleware: GetProducts and DescribeServices over the product table."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = default_products()
        self.tokens: dict[str, int] = {}

    def reset(self) -> None:
        self.records = default_products()
        self.tokens = {}

    def set_products(self, raw: dict[str, Any], _query: dict[str, str]) -> dict[str, Any]:
        new = list(raw["products"])
        for record in new:
            for key in ("instanceType", "regionCode", "on_demand"):
                if key not in record:
                    raise KeyError(f"a product record needs {key}")
        if raw.get("replace"):
            self.records = new
        else:
            keys = {_sku({**_DEFAULTS, **r}) for r in new}
            self.records = [r for r in self.records if _sku({**_DEFAULTS, **r}) not in keys] + new
        return {"products": len(self.records)}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if not auth.startswith("AWS4-HMAC-SHA256 ") or "/pricing/aws4_request" not in auth:
            return _error(start_response, "MissingAuthenticationTokenException", 403, "Missing Authentication Token")
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            return _error(start_response, "SerializationException", 400, "the body is not JSON")
        action = target.removeprefix(TARGET_PREFIX)
        if action == "GetProducts":
            return self.get_products(params, start_response)
        if action == "DescribeServices":
            return _reply(start_response, {"FormatVersion": "aws_v1", "Services": [
                {"ServiceCode": "AmazonEC2", "AttributeNames": sorted(product_document(
                    {"instanceType": "x", "regionCode": "us-east-1", "on_demand": 0})["product"]["attributes"])}]})
        return _error(start_response, "UnknownOperationException", 400, f"unknown operation {target!r}")

    def get_products(self, params: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if params.get("ServiceCode") != "AmazonEC2":
            return _error(start_response, "NotFoundException", 400,
                          f"Service code {params.get('ServiceCode')!r} not found (this emulator prices AmazonEC2)")
        filters = params.get("Filters") or []
        for f in filters:
            if f.get("Type") not in ("TERM_MATCH", "EQUALS") or "Field" not in f or "Value" not in f:
                return _error(start_response, "InvalidParameterException", 400, f"Invalid filter {json.dumps(f)}: "
                              "Type must be TERM_MATCH or EQUALS, with Field and Value")
        limit = int(params.get("MaxResults") or 100)
        if not 1 <= limit <= 100:
            return _error(start_response, "InvalidParameterException", 400, "MaxResults must be between 1 and 100")
        docs = [product_document(r) for r in self.records]
        matched = [d for d in docs if all(str(d["product"]["attributes"].get(f["Field"], "")).lower()
                                          == str(f["Value"]).lower() for f in filters)]
        start = 0
        if params.get("NextToken"):
            if params["NextToken"] not in self.tokens:
                return _error(start_response, "InvalidNextTokenException", 400, "The pagination token is invalid.")
            start = self.tokens.pop(params["NextToken"])
        page = matched[start:start + limit]
        answer: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(d) for d in page]}
        if start + limit < len(matched):
            token = uuid.uuid4().hex
            self.tokens[token] = start + limit
            answer["NextToken"] = token
        return _reply(start_response, answer)


def _reply(start_response: StartResponse, doc: dict[str, Any]) -> list[bytes]:
    payload = json.dumps(doc).encode()
    start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(payload))),
                              ("x-amzn-RequestId", str(uuid.uuid4()))])
    return [payload]


def _error(start_response: StartResponse, code: str, status: int, message: str) -> list[bytes]:
    reply = error_body(code, message, status)
    start_response(f"{status} Error", [("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body))),
                                       *reply.headers])
    return [reply.body]


def error_body(code: str, message: str, status: int) -> ErrorBody:
    """The Price List API's JSON 1.1 error body."""
    return ErrorBody("application/x-amz-json-1.1", json.dumps({"__type": code, "Message": message}).encode(),
                     (("x-amzn-RequestId", str(uuid.uuid4())),))


def identify(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if not target.startswith(TARGET_PREFIX):
        return None
    try:
        params = json.loads(body or b"{}")
    except ValueError:
        params = {}
    return target.removeprefix(TARGET_PREFIX), params if isinstance(params, dict) else {}


def build_app() -> FaultMiddleware:
    service = PriceListService()
    return FaultMiddleware(service, switch=SWITCH, error_body=error_body, identify=identify,
                           reset_state=service.reset,
                           controls={("POST", "products"): service.set_products,
                                     ("GET", "products"): lambda _raw, _query: list(service.records)})


def main(argv: list[str] | None = None) -> int:
    parser = server_parser(__doc__.split("\n\n")[0] if __doc__ else None, default_port=5056)
    return run_server(parser, parser.parse_args(argv), build_app, title="AWS Price List emulator")


if __name__ == "__main__":
    sys.exit(main())
