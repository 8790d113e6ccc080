"""EC2 list prices from the AWS Price List query API (``pricing:GetProducts``), for ``metalfleet catalogue refresh``.

One query per instance type and region, filtered to what metalfleet orders: Linux, shared tenancy, no
pre-installed software, ``capacitystatus`` Used (the other statuses price capacity reservations, and a query
without the filter returns several products per type). On demand is the OnDemand term's hourly rate; reserved_1y
and reserved_3y are the standard No Upfront reservation's hourly rate. The API is served from us-east-1 whatever
region is priced; ``endpoint_url`` points it at another endpoint (the test emulator). boto3 is imported when a
query runs; every botocore exception leaves through :func:`~metalfleet.providers.aws.errors.boundary`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import Lazy
from ..errors import ProviderError
from ..models import BillingModel
from ..record import PriceFetch, PriceSource
from ..retry import DEFAULT_POLICY, RetryPolicy
from .errors import PROVIDER, boundary

__all__ = ["PRICE_SOURCE", "PRICING_REGION", "SOURCE", "AwsPriceList", "prices_from_products"]

#: The region whose endpoint serves the Price List query API.
PRICING_REGION = "us-east-1"
FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
SOURCE = ("AWS Price List query API (GetProducts, AmazonEC2: Linux, Shared tenancy, no pre-installed software, "
          "capacitystatus Used; reserved = standard No Upfront, hourly)")
_LEASES = {"1yr": BillingModel.RESERVED_1Y, "3yr": BillingModel.RESERVED_3Y}


def _hourly(term: Mapping[str, Any]) -> float | None:
    """The USD rate of the term's hourly price dimension (None without one)."""
    for dim in (term.get("priceDimensions") or {}).values():
        if dim.get("unit") == "Hrs" and "USD" in (dim.get("pricePerUnit") or {}):
            return float(dim["pricePerUnit"]["USD"])
    return None


def prices_from_products(products: Sequence[str], instance_type: str) -> dict[BillingModel, float]:
    """The billing-model rates of one instance type from GetProducts' PriceList strings; a ProviderError when
    the answer holds more than one product for it (the filters were not specific enough to trust a figure)."""
    docs = [json.loads(p) for p in products]
    docs = [d for d in docs if d.get("product", {}).get("attributes", {}).get("instanceType") == instance_type]
    if len(docs) > 1:
        raise ProviderError(f"Pricing GetProducts: {len(docs)} products for {instance_type}; expected one",
                            provider=PROVIDER, code="AmbiguousPrice")
    if not docs:
        return {}
    terms = docs[0].get("terms") or {}
    out: dict[BillingModel, float] = {}
    for term in (terms.get("OnDemand") or {}).values():
        rate = _hourly(term)
        if rate is not None:
            out[BillingModel.ON_DEMAND] = rate
    for term in (terms.get("Reserved") or {}).values():
        attrs = term.get("termAttributes") or {}
        model = _LEASES.get(str(attrs.get("LeaseContractLength")))
        if model and attrs.get("PurchaseOption") == "No Upfront" and attrs.get("OfferingClass") == "standard":
            rate = _hourly(term)
            if rate is not None:
                out[model] = rate
    return out


class AwsPriceList:
    """Prices of EC2 instance types per region from the Price List query API."""

    def __init__(self, endpoint_url: str | None = None, profile: str | None = None,
                 retry: RetryPolicy = DEFAULT_POLICY) -> None:
        self.endpoint_url = endpoint_url
        self.profile = profile
        self.retry = retry
        self._pricing: Lazy[Any] = Lazy(self._build)

    def _build(self) -> Any:
        with boundary("Pricing CreateClient"):
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(profile_name=self.profile, region_name=PRICING_REGION)
            return session.client("pricing", endpoint_url=self.endpoint_url, config=Config(
                region_name=PRICING_REGION, retries={"total_max_attempts": 1, "mode": "standard"},
                user_agent_extra="metalfleet"))

    def _products(self, region: str, instance_type: str) -> list[str]:
        filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v}
                   for k, v in {"instanceType": instance_type, "regionCode": region, **FILTERS}.items()]
        out: list[str] = []
        with boundary("Pricing GetProducts", instance_type=instance_type):
            for page in self._pricing().get_paginator("get_products").paginate(
                    ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1"):
                out.extend(page.get("PriceList") or [])
        return out

    def prices(self, region: str, names: Sequence[str]) -> dict[str, dict[BillingModel, float]]:
        """``name`` -> billing model -> hourly USD for every type the API prices in ``region`` (absent: none)."""
        out: dict[str, dict[BillingModel, float]] = {}
        for name in names:
            found = prices_from_products(self.retry.call(self._products, region, name), name)
            if found:
                out[name] = found
        return out


def _fetch(endpoint_url: str | None) -> PriceFetch:
    return AwsPriceList(endpoint_url=endpoint_url).prices


#: What ``catalogue refresh`` asks: the Price List query API, in USD.
PRICE_SOURCE = PriceSource("USD", SOURCE, _fetch)
