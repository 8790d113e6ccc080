"""What a run needs, as ``metalfleet plan`` reads it (REQUIREMENTS.yaml): validated strictly like a cluster spec,
every error naming the field (``InvalidSpecError(field=, value=)`` through :func:`~metalfleet.providers.spec.
validation_error`). The planner (:mod:`~metalfleet.providers.planner`) turns them into ranked options.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InvalidSpecError
from .models import PERIOD_HOURS, BillingModel, Fabric
from .spec import Flag, Int, Number

__all__ = ["HOURS_PER_MONTH", "HOURS_PER_YEAR", "Checks", "ClusterDefaults", "Duration", "PlanRequirements",
           "StorageNeed", "load_requirements", "parse_requirements"]

#: Hours in a billing month (730 = 8760 / 12, the convention AWS's and Alibaba's price pages use).
HOURS_PER_MONTH = PERIOD_HOURS["month"]
HOURS_PER_YEAR = PERIOD_HOURS["year"]


class _Strict(BaseModel):
    #: Numbers as in the cluster spec (:data:`~metalfleet.providers.spec.Int`, ``Number``, ``Flag``): ``gpus: true``
    #: or ``gpus: '64'`` is no count, and ``.inf`` no duration, rate or budget.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


#: A run of more than a century is a typo (and its cost would overflow what a float holds).
_CENTURY_HOURS = 100 * 8760.0


class Duration(_Strict):
    """How long the run lasts: exactly one of hours, days, weeks or months (a month is 730 hours)."""

    hours: Number | None = Field(None, gt=0, le=_CENTURY_HOURS)
    days: Number | None = Field(None, gt=0, le=_CENTURY_HOURS / 24)
    weeks: Number | None = Field(None, gt=0, le=_CENTURY_HOURS / 168)
    months: Number | None = Field(None, gt=0, le=1200)

    @model_validator(mode="after")
    def _one(self) -> Duration:
        given = [k for k in ("hours", "days", "weeks", "months") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of hours, days, weeks, months (got {', '.join(given) or 'none'})")
        return self

    @property
    def total_hours(self) -> float:
        return float(self.hours or 0) + 24.0 * float(self.days or 0) + 168.0 * float(self.weeks or 0) + \
            HOURS_PER_MONTH * float(self.months or 0)

    def __str__(self) -> str:
        for key in ("hours", "days", "weeks", "months"):
            value = getattr(self, key)
            if value is not None:
                return f"{value:g} {key}"
        return "?"


class StorageNeed(_Strict):
    shared_tib: Number = Field(0, ge=0, description="a shared (parallel) file system for the whole run, TiB")
    block_gib_per_node: Number = Field(0, ge=0, description="a block (data) volume on every node, GiB")


class Checks(_Strict):
    """The buyers' checklist thresholds (warnings, not refusals)."""

    min_cpu_cores_per_gpu: Number = Field(4, ge=0, description="physical CPU cores per GPU below this: warned")
    min_nvme_tib_per_node: Number = Field(0, ge=0, description="local NVMe per node below this: warned")
    max_price_age_days: Int = Field(180, ge=0, description="prices older than this: warned")


class ClusterDefaults(_Strict):
    """What the emitted cluster spec gets beyond the plan: its name, image, tags, and any other spec keys."""

    name: str = "planned"
    image: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    #: Further cluster-spec keys (zone, network, ssh, storage, ...), merged over what the plan writes.
    spec: dict[str, Any] = Field(default_factory=dict)


class PlanRequirements(_Strict):
    """What a run needs. Either ``gpus`` (total accelerators) or ``nodes``."""

    gpus: Int | None = Field(None, ge=1, le=65536)
    nodes: Int | None = Field(None, ge=1, le=2048)
    gpu: list[str] = Field(default_factory=list, description="GPU/NPU models allowed (any when empty)")
    min_gpu_memory_gib: Int = Field(0, ge=0)
    #: For a multi-node run: ``rdma`` (any RDMA fabric), ``any`` (warned when not RDMA) or a list of fabric kinds.
    fabric: str | list[Fabric] = "rdma"
    bare_metal: Flag | None = None
    providers: list[str] = Field(default_factory=list, description="allowed providers (default: all but fake)")
    regions: list[str] = Field(default_factory=list, description="allowed regions (default: any)")
    billing: list[BillingModel] = Field(default_factory=list, description="allowed billing models (default: all)")
    duration: Duration
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    #: 1 unit of the named currency = this many units of ``currency``; never fetched, always given.
    exchange_rates: dict[str, Number] = Field(default_factory=dict)
    budget: Number | None = Field(None, gt=0, description="total budget in currency")
    storage: StorageNeed = StorageNeed()
    egress_tib: Number = Field(0, ge=0, description="data sent out to the internet over the run, TiB")
    orderable_only: Flag = Field(True, description="only offerings a metalfleet driver orders")
    checks: Checks = Checks()
    cluster: ClusterDefaults = ClusterDefaults()

    @field_validator("gpu", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("fabric")
    @classmethod
    def _fabric(cls, v: str | list[Fabric]) -> str | list[Fabric]:
        if isinstance(v, str) and v not in ("rdma", "any"):
            raise ValueError(f"fabric {v!r}: give rdma, any, or a list of fabric kinds ({', '.join(Fabric)})")
        return v

    @field_validator("exchange_rates")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for code, rate in v.items():
            if len(code) != 3 or not code.isupper():
                raise ValueError(f"{code!r}: a currency is a three-letter ISO 4217 code such as CNY")
            if not rate > 0:
                raise ValueError(f"{code}: the rate must be > 0 (got {rate})")
        return v

    @model_validator(mode="after")
    def _size(self) -> PlanRequirements:
        if (self.gpus is None) == (self.nodes is None):
            raise ValueError("give either gpus (total accelerators) or nodes, not both and not neither")
        return self

    def rate(self, currency: str) -> float | None:
        """Units of ``self.currency`` per unit of ``currency`` (1 for the same currency; None when not given)."""
        return 1.0 if currency == self.currency else self.exchange_rates.get(currency)


def parse_requirements(data: Any, source: str = "<requirements>") -> PlanRequirements:
    """Validated requirements; an InvalidSpecError naming each field at fault."""
    from .spec import validation_error

    if not isinstance(data, dict):
        raise InvalidSpecError(f"invalid plan requirements {source}: top level must be a mapping, got "
                               f"{type(data).__name__}", field="(top level)", value=data)
    try:
        return PlanRequirements.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, f"invalid plan requirements {source}",
                               unknown="unknown key (not a plan requirement)") from None


def load_requirements(path: str | Path) -> PlanRequirements:
    from .spec import load_yaml

    return parse_requirements(load_yaml(path, "plan requirements"), str(path))
