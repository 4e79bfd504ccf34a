"""Reading the Prometheus text of GET /metrics in tests."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True, slots=True)
class Scrape:
    samples: list[tuple[str, dict[str, str], float]]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        return cls(
            [
                (sample.name, dict(sample.labels), sample.value)
                for family in text_string_to_metric_families(text)
                for sample in family.samples
            ]
        )

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include `labels` (0 if none)."""
        return sum(
            value
            for sample, found, value in self.samples
            if sample == name and all(found.get(k) == v for k, v in labels.items())
        )

    def names(self) -> set[str]:
        return {name for name, _, _ in self.samples}

    def labels_of(self, name: str, label: str) -> set[str]:
        return {found[label] for sample, found, _ in self.samples if sample == name}
