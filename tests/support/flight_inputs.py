"""Stand-ins for the flight recorder's CPU tests (issue 54, items 2-4): a GPU's stream as a
clock that runs behind the host (`FakeStream`), and CUDA timing events on it (`FakeEvent`), as
torch.cuda.Event(enable_timing=True) is called: record(), query(), elapsed_time(other) in ms."""

from __future__ import annotations


class FakeStream:
    """A stream whose queued work ends at `queued_ms` and whose GPU has reached `now_ms`."""

    def __init__(self):
        self.queued_ms = 0.0
        self.now_ms = 0.0
        self.events_made = 0

    def queue(self, ms: float) -> None:
        """Queue `ms` of work after what is queued."""
        self.queued_ms = max(self.queued_ms, self.now_ms) + ms

    def run_to(self, ms: float) -> None:
        self.now_ms = ms

    def catch_up(self) -> None:
        self.now_ms = self.queued_ms

    def event(self) -> FakeEvent:
        self.events_made += 1
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, stream: FakeStream):
        self.stream, self.at_ms, self.records = stream, None, 0

    def record(self) -> None:
        self.at_ms = max(self.stream.queued_ms, self.stream.now_ms)
        self.records += 1

    def query(self) -> bool:
        return self.at_ms is not None and self.at_ms <= self.stream.now_ms

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.query() and other.query(), "elapsed_time of an event not completed"
        return other.at_ms - self.at_ms
