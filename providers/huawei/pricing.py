"""BMS list prices from Huawei Cloud's BSS price inquiry, for ``metalfleet catalogue refresh``: the yearly/monthly
(prePaid) prices BMS sells servers at, and the on-demand one where BSS has it.

BMS creates yearly/monthly servers only, so the prices that matter are the period ones. Per flavor and region:
``ListOnDemandResourceRatings`` (``POST /v2/bills/ratings/on-demand-resources``, usage ``Duration`` 1 hour) for
``on_demand``, then ``ListRateOnPeriodDetail`` (``POST /v2/bills/ratings/period-resources/subscribe-rate``) for one
server (``subscription_num`` 1) for one period (``period_num`` 1) of ``period_type`` 2 (a month: ``monthly``, over
:data:`~metalfleet.providers.requirements.HOURS_PER_MONTH`) and of ``period_type`` 3 (a year: ``reserved_1y``, over
:data:`~metalfleet.providers.requirements.HOURS_PER_YEAR`), as the catalogue holds every price per hour. Each names
service type ``hws.service.type.bms``, resource type ``hws.resource.type.bms`` and the flavor as resource spec.
``PeriodProductInfo.available_zone`` is not sent: absent, it is no filter (its SDK docstring), and the catalogue
prices a region.

A flavor BSS does not price for a billing model (``CBC.99006006``: BSS finds a product by service type, resource
type, region and resource spec, and found none) is left unpriced for that model only, for the refresh to keep and
report its older price, while its other models are priced. The figure is the answer's ``official_website_amount``
(the list price, before the account's discounts: ``optional_discount_rating_results`` are not read), in CNY
(``measure_id`` 1: yuan; the period answer's ``currency`` absent means CNY).

BSS is a global service: ``GlobalCredentials`` (``HUAWEICLOUD_SDK_AK`` / ``HUAWEICLOUD_SDK_SK`` and the account's
``HUAWEICLOUD_SDK_DOMAIN_ID``: without it the SDK first asks IAM for it), and the inquiry names the project of
the region priced (``HUAWEICLOUD_SDK_PROJECT_ID``). The SDK's own retries are off; :mod:`..retry` decides, and
every SDK exception leaves through :func:`~metalfleet.providers.huawei.errors.boundary`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from ..errors import AuthError, InvalidSpecError, ProviderError
from ..models import BillingModel
from ..record import PriceFetch, PriceSource
from ..requirements import HOURS_PER_MONTH, HOURS_PER_YEAR
from ..retry import DEFAULT_POLICY, RetryPolicy
from .billing import BSS_ENDPOINT, BSS_ENDPOINT_ENV
from .errors import PROVIDER, boundary

__all__ = ["BSS_ENDPOINT", "BSS_ENDPOINT_ENV", "NOT_PRICED", "PERIODS", "PRICE_SOURCE", "SOURCE",
           "HuaweiPriceInquiry", "hourly_from_answer", "period_amount_from_answer"]

SERVICE_TYPE = "hws.service.type.bms"
RESOURCE_TYPE = "hws.resource.type.bms"
#: BSS: "the product you inquired about cannot be found" (the flavor is not priced so in the region).
NOT_PRICED = "CBC.99006006"
#: usage_measure_id 4 = hour; measure_id 1 = yuan.
HOUR, YUAN = 4, 1
#: PeriodProductInfo.period_type (its docstring): 0 day, 2 month, 3 year, 4 hour.
MONTH, YEAR = 2, 3
#: billing model -> the period_type that prices it and the hours one period covers.
PERIODS: dict[BillingModel, tuple[int, float]] = {
    BillingModel.MONTHLY: (MONTH, HOURS_PER_MONTH),
    BillingModel.RESERVED_1Y: (YEAR, HOURS_PER_YEAR),
}
SOURCE = ("Huawei Cloud BSS price inquiry (hws.service.type.bms, one server, official website price, CNY; "
          f"ListRateOnPeriodDetail: monthly = period_type 2 x1 / {HOURS_PER_MONTH:g} h, reserved_1y = period_type 3 "
          f"x1 / {HOURS_PER_YEAR:g} h; ListOnDemandResourceRatings: on_demand = one hour)")


def _yuan(amount: Any, measure: Any, currency: Any, flavor: str) -> float:
    """``amount`` as a float of yuan; a ProviderError for another currency or unit (never guessed into CNY)."""
    if currency not in (None, "", "CNY"):
        raise ProviderError(f"Huawei BSS priced {flavor} in {currency}; expected CNY", provider=PROVIDER,
                            code="UnexpectedCurrency")
    if measure not in (None, YUAN):
        raise ProviderError(f"Huawei BSS priced {flavor} in measure unit {measure}; expected 1 (yuan)",
                            provider=PROVIDER, code="UnexpectedUnit")
    return float(Decimal(str(amount)))


def hourly_from_answer(answer: Any, flavor: str) -> float | None:
    """The list price (CNY per hour) of ``flavor`` in a ListOnDemandResourceRatingsResponse; None when the answer
    prices nothing; a ProviderError for an answer in another currency or unit."""
    results = getattr(answer, "product_rating_results", None) or []
    if not results:
        return None
    result = results[0]
    amount = getattr(result, "official_website_amount", None)
    if amount is None:
        amount = getattr(result, "amount", None)
    if amount is None:
        return None
    measure = getattr(result, "measure_id", None) or getattr(answer, "measure_id", None)
    return _yuan(amount, measure, getattr(answer, "currency", None), flavor)


def period_amount_from_answer(answer: Any, flavor: str) -> float | None:
    """The list price (CNY for the whole period asked) of ``flavor`` in a ListRateOnPeriodDetailResponse: its
    ``official_website_rating_result``'s product result (the total when it itemises none); None when the answer
    prices nothing; a ProviderError for an answer in another currency or unit."""
    official = getattr(answer, "official_website_rating_result", None)
    if official is None:
        return None
    results = getattr(official, "product_rating_results", None) or []
    line = next((r for r in results if getattr(r, "id", None) == "1"), None)
    amount = getattr(line, "official_website_amount", None) if line is not None else None
    measure = getattr(line, "measure_id", None) if line is not None else None
    if amount is None:
        amount = getattr(official, "official_website_amount", None)
    if amount is None:
        return None
    return _yuan(amount, measure or getattr(official, "measure_id", None), getattr(answer, "currency", None), flavor)


class HuaweiPriceInquiry:
    """Yearly/monthly and on-demand prices of BMS flavors per region from the BSS price inquiry."""

    def __init__(self, endpoint: str | None = None, ak: str | None = None, sk: str | None = None,
                 domain_id: str | None = None, project_id: str | None = None,
                 retry: RetryPolicy = DEFAULT_POLICY, timeout: tuple[float, float] = (10.0, 60.0)) -> None:
        self.endpoint = endpoint or os.environ.get(BSS_ENDPOINT_ENV) or BSS_ENDPOINT
        self.domain_id = domain_id or os.environ.get("HUAWEICLOUD_SDK_DOMAIN_ID")
        self.project_id = project_id or os.environ.get("HUAWEICLOUD_SDK_PROJECT_ID")
        self.retry = retry
        self.timeout = timeout
        self._ak, self._sk = ak, sk
        self._client: Any = None

    def __repr__(self) -> str:
        return f"HuaweiPriceInquiry(endpoint={self.endpoint!r})"

    def _bss(self) -> Any:
        if self._client is None:
            from huaweicloudsdkcore.http.http_config import HttpConfig

            from .billing import bss_client

            ak = self._ak or os.environ.get("HUAWEICLOUD_SDK_AK")
            sk = self._sk or os.environ.get("HUAWEICLOUD_SDK_SK")
            if not ak or not sk:
                raise AuthError("no Huawei Cloud credentials: set HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK",
                                provider=PROVIDER, code="NoCredentials")
            if not self.project_id:
                raise AuthError("no Huawei Cloud project id: set HUAWEICLOUD_SDK_PROJECT_ID (the price inquiry names "
                                "the project of the region priced)", provider=PROVIDER, code="NoProjectId")
            self._client = bss_client(ak, sk, self.domain_id, self.endpoint,
                                      HttpConfig(timeout=self.timeout, retry_times=0, user_agent="metalfleet"),
                                      why="BSS, which answers the price inquiry,")
        return self._client

    @staticmethod
    def _unless_not_priced(operation: str, flavor: str, ask: Callable[[], Any]) -> Any:
        """``ask()``'s answer, or None when BSS does not price the flavor so (the refusal is an answer: no retry)."""
        try:
            with boundary(f"BSS {operation}", flavor=flavor):
                return ask()
        except InvalidSpecError as exc:
            if exc.code == NOT_PRICED:
                return None
            raise

    def _inquire(self, region: str, flavor: str) -> float | None:
        """CNY per hour on demand, or None."""
        from huaweicloudsdkbss.v2 import DemandProductInfo, ListOnDemandResourceRatingsRequest, RateOnDemandReq

        body = RateOnDemandReq(project_id=self.project_id, inquiry_precision=0, product_infos=[DemandProductInfo(
            id="1", cloud_service_type=SERVICE_TYPE, resource_type=RESOURCE_TYPE, resource_spec=flavor,
            region=region, usage_factor="Duration", usage_value=1, usage_measure_id=HOUR, subscription_num=1)])
        answer = self._unless_not_priced("ListOnDemandResourceRatings", flavor, lambda: (
            self._bss().list_on_demand_resource_ratings(ListOnDemandResourceRatingsRequest(body=body))))
        return None if answer is None else hourly_from_answer(answer, flavor)

    def _inquire_period(self, region: str, flavor: str, period_type: int) -> float | None:
        """CNY for one period of ``period_type`` (2 month, 3 year) for one server, or None."""
        from huaweicloudsdkbss.v2 import ListRateOnPeriodDetailRequest, PeriodProductInfo, RateOnPeriodReq

        body = RateOnPeriodReq(project_id=self.project_id, product_infos=[PeriodProductInfo(
            id="1", cloud_service_type=SERVICE_TYPE, resource_type=RESOURCE_TYPE, resource_spec=flavor,
            region=region, period_type=period_type, period_num=1, subscription_num=1)])
        answer = self._unless_not_priced("ListRateOnPeriodDetail", flavor, lambda: (
            self._bss().list_rate_on_period_detail(ListRateOnPeriodDetailRequest(body=body))))
        return None if answer is None else period_amount_from_answer(answer, flavor)

    def prices(self, region: str, names: Sequence[str]) -> dict[str, dict[BillingModel, float]]:
        """``name`` -> billing model -> CNY per hour, for every model BSS prices the flavor at in ``region``
        (on_demand, monthly, reserved_1y; a model it does not price is absent, a flavor with none too)."""
        out: dict[str, dict[BillingModel, float]] = {}
        for name in names:
            found: dict[BillingModel, float] = {}
            hourly = self.retry.call(self._inquire, region, name)
            if hourly is not None:
                found[BillingModel.ON_DEMAND] = hourly
            for billing, (period_type, hours) in PERIODS.items():
                amount = self.retry.call(self._inquire_period, region, name, period_type)
                if amount is not None:
                    found[billing] = round(amount / hours, 6)
            if found:
                out[name] = found
        return out


def _fetch(endpoint_url: str | None) -> PriceFetch:
    return HuaweiPriceInquiry(endpoint=endpoint_url).prices


#: What ``catalogue refresh`` asks: the BSS price inquiry (period and on demand), in CNY.
PRICE_SOURCE = PriceSource("CNY", SOURCE, _fetch)
