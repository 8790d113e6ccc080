"""BMS list prices from Huawei Cloud's price inquiry (BSS ``ListOnDemandResourceRatings``), for ``metalfleet
catalogue refresh``.

One inquiry per flavor and region (``POST /v2/bills/ratings/on-demand-resources``: service type
``hws.service.type.bms``, resource type ``hws.resource.type.bms``, resource spec the flavor, one server for one
hour), so a flavor the API does not price (``CBC.99006006``, "the product you inquired about cannot be found")
is left unpriced for the refresh to report while the others are priced. The figure is the answer's
``official_website_amount`` (the list price, before the account's discounts), in CNY (``measure_id`` 1: yuan).

BSS is a global service: ``GlobalCredentials`` (``HUAWEICLOUD_SDK_AK`` / ``HUAWEICLOUD_SDK_SK`` and the account's
``HUAWEICLOUD_SDK_DOMAIN_ID``: without it the SDK first asks IAM for it), and the inquiry names the project of
the region priced (``HUAWEICLOUD_SDK_PROJECT_ID``). The SDK's own retries are off; :mod:`..retry` decides, and
every SDK exception leaves through :func:`~metalfleet.providers.huawei.errors.boundary`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ..errors import AuthError, InvalidSpecError, ProviderError
from ..models import BillingModel
from ..record import PriceFetch, PriceSource
from ..retry import DEFAULT_POLICY, RetryPolicy
from .billing import BSS_ENDPOINT, BSS_ENDPOINT_ENV
from .errors import PROVIDER, boundary

__all__ = ["BSS_ENDPOINT", "BSS_ENDPOINT_ENV", "NOT_PRICED", "PRICE_SOURCE", "SOURCE", "HuaweiPriceInquiry",
           "hourly_from_answer"]

SERVICE_TYPE = "hws.service.type.bms"
RESOURCE_TYPE = "hws.resource.type.bms"
#: BSS: "the product you inquired about cannot be found" (the flavor is not priced in the region).
NOT_PRICED = "CBC.99006006"
#: usage_measure_id 4 = hour; measure_id 1 = yuan.
HOUR, YUAN = 4, 1
SOURCE = ("Huawei Cloud BSS price inquiry (ListOnDemandResourceRatings, hws.service.type.bms, one server for one "
          "hour, official website price, CNY)")


def hourly_from_answer(answer: Any, flavor: str) -> float | None:
    """The list price (CNY per hour) of ``flavor`` in a ListOnDemandResourceRatingsResponse; None when the answer
    prices nothing; a ProviderError for an answer in another currency or unit (never guessed into CNY)."""
    results = getattr(answer, "product_rating_results", None) or []
    if not results:
        return None
    currency = getattr(answer, "currency", None)
    if currency not in (None, "CNY"):
        raise ProviderError(f"Huawei BSS priced {flavor} in {currency}; expected CNY", provider=PROVIDER,
                            code="UnexpectedCurrency")
    result = results[0]
    amount = getattr(result, "official_website_amount", None)
    if amount is None:
        amount = getattr(result, "amount", None)
    if amount is None:
        return None
    measure = getattr(result, "measure_id", None) or getattr(answer, "measure_id", None)
    if measure not in (None, YUAN):
        raise ProviderError(f"Huawei BSS priced {flavor} in measure unit {measure}; expected 1 (yuan)",
                            provider=PROVIDER, code="UnexpectedUnit")
    return float(Decimal(str(amount)))


class HuaweiPriceInquiry:
    """On-demand prices of BMS flavors per region from the BSS price inquiry."""

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

    def _inquire(self, region: str, flavor: str) -> float | None:
        from huaweicloudsdkbss.v2 import DemandProductInfo, ListOnDemandResourceRatingsRequest, RateOnDemandReq

        body = RateOnDemandReq(project_id=self.project_id, inquiry_precision=0, product_infos=[DemandProductInfo(
            id="1", cloud_service_type=SERVICE_TYPE, resource_type=RESOURCE_TYPE, resource_spec=flavor,
            region=region, usage_factor="Duration", usage_value=1, usage_measure_id=HOUR, subscription_num=1)])
        try:
            with boundary("BSS ListOnDemandResourceRatings", flavor=flavor):
                answer = self._bss().list_on_demand_resource_ratings(ListOnDemandResourceRatingsRequest(body=body))
        except InvalidSpecError as exc:
            if exc.code == NOT_PRICED:
                return None
            raise
        return hourly_from_answer(answer, flavor)

    def prices(self, region: str, names: Sequence[str]) -> dict[str, dict[BillingModel, float]]:
        """``name`` -> {on_demand: CNY per hour} for every flavor the API prices in ``region`` (absent: none)."""
        out: dict[str, dict[BillingModel, float]] = {}
        for name in names:
            hourly = self.retry.call(self._inquire, region, name)
            if hourly is not None:
                out[name] = {BillingModel.ON_DEMAND: hourly}
        return out


def _fetch(endpoint_url: str | None) -> PriceFetch:
    return HuaweiPriceInquiry(endpoint=endpoint_url).prices


#: What ``catalogue refresh`` asks: the BSS price inquiry, in CNY.
PRICE_SOURCE = PriceSource("CNY", SOURCE, _fetch)
