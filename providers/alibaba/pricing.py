"""ECS instance prices from DescribePrice (CNY), for ``metalfleet catalogue refresh``: every billing model the
driver orders.

DescribePrice calls per instance type and region, one per billing model (:data:`UNITS`): ``PriceUnit=Hour``
prices pay-as-you-go (PostPaid, ``on_demand``); ``PriceUnit=Hour`` with ``SpotStrategy=SpotAsPriceGo`` (what a spot
order asks for; the DescribePriceRequest model: "takes effect only when ``PriceUnit=Hour`` and ``Period=1``") the
spot instance's hour (``spot``); ``PriceUnit=Month`` with ``Period=1`` one month of subscription (PrePaid,
``monthly``); ``PriceUnit=Year`` with ``Period=1`` and ``Period=3`` one and three years (``reserved_1y``,
``reserved_3y``: a year's Period is "1 to 5"). The catalogue holds every price per hour, so a subscription's price is
divided by the hours it buys (:data:`~metalfleet.providers.requirements.HOURS_PER_MONTH`, 730 h, the convention the
planner bills whole months by; :data:`~metalfleet.providers.requirements.HOURS_PER_YEAR`, 8760 h, a year). The
spot price is asked without ``ZoneId`` (spot prices "may vary across zones"; the catalogue prices a region) and
with ``SpotDuration`` left at its default (1 hour of protection), as RunInstances orders spot.

The figure is the instance's own ``TradePrice`` (the ``instanceType`` line of ``PriceInfo.Price.DetailInfos`` when
ECS itemises the order, its system disk being a separate line; the order's ``TradePrice`` otherwise): what the
AccessKey's account would pay, after the discounts in ``PriceInfo.Rules``. A type ECS does not sell in the region
(``InvalidInstanceType.*``) is left unpriced, asked no further, so the refresh keeps and reports its older prices;
a billing model ECS has no price for (``PriceNotFound``: a type not sold as spot, say) is left unpriced for that
model only. Calls go through the driver's client (same credentials, endpoint, SDK retries off,
:func:`~metalfleet.providers.alibaba.errors.boundary`); the project's retry policy alone retries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import MetalfleetError, ProviderError
from ..models import BillingModel
from ..record import PriceFetch, PriceSource
from ..requirements import HOURS_PER_MONTH, HOURS_PER_YEAR
from ..retry import DEFAULT_POLICY, RetryPolicy
from .errors import PROVIDER
from .request import SPOT_STRATEGY

__all__ = ["CURRENCY", "PRICE_SOURCE", "SOURCE", "UNITS", "AlibabaPriceList", "price_of"]

CURRENCY = "CNY"
SOURCE = ("Alibaba Cloud ECS DescribePrice (instance TradePrice in CNY; on_demand = PostPaid PriceUnit Hour, "
          f"spot = PriceUnit Hour SpotStrategy {SPOT_STRATEGY}, monthly = PrePaid PriceUnit Month Period 1 / "
          f"{HOURS_PER_MONTH:g} h, reserved_1y = PriceUnit Year Period 1 / {HOURS_PER_YEAR:g} h, reserved_3y = "
          f"PriceUnit Year Period 3 / {3 * HOURS_PER_YEAR:g} h)")
#: billing model -> the DescribePrice parameters that price it, and the hours its answer covers.
UNITS: dict[BillingModel, tuple[dict[str, Any], float]] = {
    BillingModel.ON_DEMAND: ({"PriceUnit": "Hour"}, 1.0),
    BillingModel.SPOT: ({"PriceUnit": "Hour", "SpotStrategy": SPOT_STRATEGY}, 1.0),
    BillingModel.MONTHLY: ({"PriceUnit": "Month", "Period": 1}, HOURS_PER_MONTH),
    BillingModel.RESERVED_1Y: ({"PriceUnit": "Year", "Period": 1}, HOURS_PER_YEAR),
    BillingModel.RESERVED_3Y: ({"PriceUnit": "Year", "Period": 3}, 3 * HOURS_PER_YEAR),
}
#: Codes that mean "ECS does not sell this type here" (not a fault): the type stays unpriced, asked no further.
NOT_SOLD = ("InvalidInstanceType", "InvalidResourceType.NotSupported")
#: "The price of your queried resource is not available now" (DescribePrice's error table): this billing model of
#: the type stays unpriced; its others are still asked.
NO_PRICE = "PriceNotFound"


def price_of(body: Mapping[str, Any], instance_type: str) -> float:
    """The instance's TradePrice in a DescribePrice answer (``body``: the response body's map); a ProviderError
    when it is missing or not in CNY (never a guessed figure)."""
    price = (body.get("PriceInfo") or {}).get("Price") or {}
    currency = price.get("Currency")
    if currency != CURRENCY:
        raise ProviderError(f"ECS DescribePrice: {instance_type} priced in {currency!r}, expected {CURRENCY}",
                            provider=PROVIDER, code="UnexpectedCurrency")
    details = ((price.get("DetailInfos") or {}).get("DetailInfo")) or []
    line = next((d for d in details if d.get("Resource") == "instanceType"), None)
    value = (line or price).get("TradePrice")
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ProviderError(f"ECS DescribePrice: no TradePrice for {instance_type} (got {value!r})",
                            provider=PROVIDER, code="MissingPrice")
    return float(value)


class AlibabaPriceList:
    """Prices of ECS instance types per region from DescribePrice (``endpoint``: as the driver takes it)."""

    def __init__(self, endpoint: str | None = None, retry: RetryPolicy = DEFAULT_POLICY) -> None:
        self.endpoint = endpoint
        self.retry = retry
        self._drivers: dict[str, Any] = {}

    def _call(self, region: str, params: dict[str, Any], instance_type: str) -> dict[str, Any]:
        driver = self._drivers.get(region)
        if driver is None:
            from .driver import AlibabaDriver

            driver = self._drivers[region] = AlibabaDriver(region=region, endpoint=self.endpoint)
        result: dict[str, Any] = driver._call("DescribePrice", {"RegionId": region, **params},
                                              instance_type=instance_type)
        return result

    def prices(self, region: str, names: Sequence[str]) -> dict[str, dict[BillingModel, float]]:
        """``name`` -> billing model -> hourly CNY for every type ECS prices in ``region`` (absent: none)."""
        out: dict[str, dict[BillingModel, float]] = {}
        for name in names:
            found: dict[BillingModel, float] = {}
            for billing, (params, hours) in UNITS.items():
                request = {"ResourceType": "instance", "InstanceType": name, **params}
                try:
                    body = self.retry.call(self._call, region, request, name)
                except MetalfleetError as exc:  # auth, quota, faults after the retries: the refresh stops
                    if (exc.code or "").startswith(NOT_SOLD):
                        break
                    if exc.code == NO_PRICE:
                        continue
                    raise
                found[billing] = round(price_of(body, name) / hours, 6)
            if found:
                out[name] = found
        return out


def _fetch(endpoint_url: str | None) -> PriceFetch:
    return AlibabaPriceList(endpoint=endpoint_url).prices


#: What ``catalogue refresh`` asks: DescribePrice, in CNY.
PRICE_SOURCE = PriceSource(CURRENCY, SOURCE, _fetch)
