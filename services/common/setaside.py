"""Records set aside: a startup, replay or rebuild step that meets a record it cannot apply (a ref row git refuses,
an event the fold cannot read) sets that one record aside and goes on, so that the service starts. Each one is a
structured log line ("record set aside", naming the step and the record) and counts in ``kb_records_set_aside``,
the records a service runs without, which alert KernelboardRecordsSetAside reports (deploy/prometheus/alerts.yml).
Where the record is a row of the service's own state it is also moved to a dead-letter table (ingest's
``ingest_refs_set_aside``); an event stays in the log, which is append-only, and is skipped on every replay alike.
"""

from contracts.refusals import clip
from services.common import metrics
from services.common.logs import get_logger

RECORDS_SET_ASIDE = metrics.gauge(
    "kb_records_set_aside",
    "Records the service runs without: rows or events a startup, replay or rebuild step could not apply, by step",
    ["step"],
)

log = get_logger(component="setaside")


class SetAside:
    """The records one run of a step set aside; ``finish`` publishes how many (with any already stored)."""

    def __init__(self, step: str):
        self.step = step
        self.records: list[str] = []

    def record(self, record: str, error: object, **ids) -> None:
        self.records.append(record)
        log.error("record set aside", step=self.step, record=clip(record, 200), error=clip(str(error), 500), **ids)

    def finish(self, total: int | None = None) -> int:
        """Set the gauge to ``total`` (the step's whole dead-letter count) or to this run's records."""
        count = len(self.records) if total is None else total
        RECORDS_SET_ASIDE.labels(self.step).set(count)
        return count
