"""The relay loop: while leading, tick the queue and publish each batch, then finish it.

Order of effects for one batch (never changed without changing the guarantees):

1. take the batch (committed at once, so a re-send keeps its batch id);
2. frame it (``pgshovel.relay.framing``): Begin, its events in event order — one
   message each, or row changes many to a message in every partition —, Commit;
3. push to the writer, which returns only when Kafka acknowledged every message;
4. ``pgq.finish_batch`` and commit on the source.

A crash anywhere before 4 sends the same batch again after restart
(at-least-once); readers drop the re-send by batch id. A failure after Begin
reached Kafka is followed by a Rollback when the writer still works, else by a
new publisher identity, which readers treat as abandoning the open batch.
Failures propagate to the caller, which applies the error policy (see
``pgshovel.policy``) and retries from step 1.
"""

from __future__ import annotations

import logging
import operator
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable

from pgshovel.abc import BatchInfo, EventDecoder, QueueReader, StreamWriter, TickInfo
from pgshovel.cluster.watch import SetWatch
from pgshovel.errors import BrokerUnavailable, LeadershipLost, MessageTooLarge, PgshovelError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.packed_run import PackedRun
from pgshovel.stream.handoff import parse_txid_snapshot
from pgshovel.stream.operations import EVENT_TYPES

logger = logging.getLogger(__name__)


def _tick_message(tick: TickInfo) -> stream_pb2.Tick:
    message = stream_pb2.Tick(id=tick.id, timestamp=tick.timestamp)
    if tick.snapshot:
        snapshot = parse_txid_snapshot(tick.snapshot)
        message.snapshot.xmin = snapshot.xmin
        message.snapshot.xmax = snapshot.xmax
        message.snapshot.xip.extend(sorted(snapshot.xip))
    return message


_event_time = operator.itemgetter(1)
_kind_and_table = operator.itemgetter(3, 5, 6)


class BatchPublisher:
    """Publishes batches of one queue through one writer; knows nothing of leadership."""

    def __init__(
        self,
        queue: QueueReader,
        writer: StreamWriter,
        decoder: EventDecoder,
        node: bytes,
        set_watch: SetWatch,
        metrics: RelayMetrics,
        epoch: int,
        lost: threading.Event | None = None,
    ) -> None:
        self.queue = queue
        self.writer = writer
        self.decoder = decoder
        self.node = node
        self.set_watch = set_watch
        self.metrics = metrics
        self.epoch = epoch
        self.lost = lost or threading.Event()
        self.framer = writer.framer(decoder, epoch)

    def _push(self) -> None:
        """Push what the framer framed; what a failed push held goes back to the framer."""
        messages, partitions = self.framer.take()
        try:
            if self.lost.is_set():
                raise LeadershipLost(
                    "leadership lost (zookeeper connection suspended): batch abandoned"
                )
            self.writer.push(messages, partitions)
        except BaseException:
            self.framer.restore(messages, partitions)
            raise

    def publish(self, batch: BatchInfo) -> int:
        """Publish one batch and finish it; returns the number of events.

        The writer's framer (``pgshovel.relay.framing``) encodes each event
        straight to bytes and frames it; what it framed is pushed whenever it is
        ready and at the batch's end, then flushed once; a message takes its
        sequence number only once encoded, so a row that fails to encode takes
        none.
        """
        started = time.monotonic()
        start_tick = batch.start.timestamp / 1e6
        metrics = self.metrics
        metrics.publishing = True
        #: events by (type, schema, table): counted at C speed, mutations picked at the end
        seen: Counter[tuple[str, str, str]] = Counter()
        # A batch that cannot hold an event (the queue's sequence did not move between its
        # ticks) leaves the lag alone: its start tick may be old, nothing of it is pending.
        may_hold = batch.start.event_seq is None or batch.start.event_seq != batch.end.event_seq
        if may_hold:
            metrics.taken(start_tick)
        oldest_event = float("inf")
        identifier = stream_pb2.BatchIdentifier(id=batch.id, node=self.node)
        framer = self.framer
        framer.begin(
            identifier,
            _tick_message(batch.start),
            _tick_message(batch.end),
            self.set_watch.version,
        )
        count = 0
        size_before = self.writer.bytes_sent
        clock = time.monotonic
        # Where the batch's time went, for the log line: waiting for rows, decoding, Kafka.
        reading = decoding = sending = 0.0
        try:
            mark = clock()
            for chunk in self.queue.events(batch):
                fetched = clock()
                reading += fetched - mark
                chunk_oldest = min(chunk, key=_event_time)[1] / 1e6
                if chunk_oldest < oldest_event:
                    oldest_event = chunk_oldest
                    metrics.refine(oldest_event, start_tick)
                seen.update(map(_kind_and_table, chunk))
                events = len(chunk)
                for item in chunk:
                    if item.__class__ is PackedRun:  # a run of COPY lines: its changes
                        seen[_kind_and_table(item)] += item.size - 1
                        events += item.size - 1
                framer.add(chunk)
                count += events
                mark = clock()
                decoding += mark - fetched
                if framer.ready:
                    self._push()
                    fetched, mark = mark, clock()
                    sending += mark - fetched
            fetched = clock()
            reading += fetched - mark
            framer.commit()
            self._push()
            self.writer.flush()
            sending += clock() - fetched
        except BaseException as error:
            metrics.publishing = False
            self.queue.abandon()
            self._roll_back(identifier, error)
            raise
        self.queue.finish(batch)
        seconds = time.monotonic() - started
        sent = self.writer.bytes_sent - size_before
        # Whatever was pending went out with this batch (a batch holds events of transactions
        # that wrote them before its start tick even when the sequence did not move).
        lag = metrics.published() if count else metrics.nothing_published()
        metrics.batches += 1
        metrics.events += count
        metrics.bytes += sent
        for (kind, schema, name), events in seen.items():
            if kind in EVENT_TYPES:
                metrics.tables[(schema, name)] += events
        metrics.publishing = False
        logger.log(
            logging.INFO if count else logging.DEBUG,  # an idle tick's batch is no news
            "batch %d: %d events, %d bytes, %.3fs, lag %.3fs (reading %.3fs, decoding %.3fs, "
            "kafka %.3fs)",
            batch.id,
            count,
            sent,
            seconds,
            lag,
            reading,
            decoding,
            sending,
        )
        return count

    def _roll_back(self, identifier: stream_pb2.BatchIdentifier, error: BaseException) -> None:
        """After a failure: a Rollback if the writer still works, else a new identity.

        A failed ``push`` leaves Kafka's state uncertain (some of the chunk may
        have landed), so the publisher identity is replaced: readers then treat
        the open batch as abandoned. A failure before the push (reading or
        decoding the batch), or a data error the writer raised before the set
        topic got anything of the push (a message too large for the producer),
        leaves Kafka holding exactly the pushed prefix: the framer rewinds to
        the first unpushed sequence and sends a Rollback. A message the broker
        refused after it was sent (``MessageTooLarge.dropped``) is an uncertain
        state again.
        """
        uncertain = isinstance(error, MessageTooLarge) and error.dropped
        certain = not (uncertain or isinstance(error, (BrokerUnavailable, LeadershipLost)))
        messages, partitions = self.framer.roll_back(certain)
        if not messages:
            return
        try:
            self.writer.push(messages, partitions)
            self.writer.flush()
            self.metrics.rollbacks += 1
            logger.warning("batch %d rolled back on the stream", identifier.id)
        except PgshovelError as rollback_error:
            logger.error("could not publish a rollback: %s", rollback_error)
            self.framer.roll_back(False)


class Pacer:
    """Calls ``pgq.ticker`` at most once per interval (interval 0: never; pgqd ticks).

    PgQ ticks when events were written since the last tick, else only after its
    idle period (up to a minute, growing with the idle time). A transaction in
    progress at a tick may have written its events before it: they belong to no
    batch until a later tick, which without another write comes only at the idle
    period. So when PgQ does not tick, the pacer looks for events committed after
    the last tick's snapshot and, finding any, ticks at once (``force_tick``):
    every commit reaches a batch within about one interval.
    """

    def __init__(self, queue: QueueReader, interval: float, metrics: RelayMetrics) -> None:
        self.queue = queue
        self.interval = interval
        self.metrics = metrics
        self._next = 0.0
        #: the last tick's txid snapshot; None until read (again) after a tick
        self._snapshot: str | None = None

    def maybe_tick(self) -> None:
        if self.interval <= 0:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.interval
        queue = self.queue
        tick = queue.tick()
        if tick is None:
            if self._snapshot is None:
                self._snapshot = queue.last_tick_snapshot()
            if self._snapshot is None or not queue.committed_after(self._snapshot):
                return
            tick = queue.force_tick()
            if tick is None:
                return
            logger.debug("tick %d: events committed after the last tick's snapshot", tick)
        self.metrics.last_tick = time.time()
        self._snapshot = None

    def pause(self, poll_interval: float) -> float:
        """How long the loop may sleep when no batch is ready: the poll interval, or less
        when the next tick is due sooner (else ticks would come at multiples of the poll
        interval: 60 ms apart, not 50, with the defaults)."""
        if self.interval <= 0:
            return poll_interval
        return max(0.0, min(poll_interval, self._next - time.monotonic()))


def new_identifier() -> str:
    """How this relay process names itself in the election."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lead(
    publisher: BatchPublisher,
    pacer: Pacer,
    stop: threading.Event,
    lost: threading.Event,
    poll_interval: float,
    on_success: Callable[[], None],
    before_publish: Callable[[], bool] = lambda: True,
) -> None:
    """Publish batches until asked to stop, leadership is lost, the set is dropped or
    moved to another database.

    Any failure propagates (the caller's error policy decides); ``on_success``
    is called after every step that went through. ``before_publish`` runs once a
    batch is taken (failover-safe publishing waits there); False abandons it.
    """
    watched = publisher.set_watch
    while not stop.is_set() and not lost.is_set() and watched.exists and not watched.moved.is_set():
        pacer.maybe_tick()
        batch = publisher.queue.next_batch()
        if batch is None:
            on_success()
            stop.wait(pacer.pause(poll_interval))
            continue
        if lost.is_set() or not before_publish():
            publisher.queue.abandon()
            break
        publisher.publish(batch)
        on_success()
