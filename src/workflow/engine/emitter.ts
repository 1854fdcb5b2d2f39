import type { Clock, Logger } from '../../util/index.js';
import type { StageRecord, WorkflowTask } from '../task.js';
import {
  busEventTypeOf,
  type PluginHost,
  stageEndPayload,
  stageEvent,
  stageEventType,
  type TelemetryEvent,
  type TelemetryEventType,
  type TelemetryListener,
  type WorkflowBusEventData,
  type WorkflowBusEventType,
} from '../telemetry.js';
import type { Run } from './run-state.js';

export interface Emitter {
  /**
   * Records an event in the run's log and hands it to listeners, plugins and the bus. `timestamp` is the
   * moment the caller already read for what the event reports (a stage's start or end): reading the clock
   * again would cost a system call per event for the same millisecond.
   */
  emit(
    run: Run,
    type: TelemetryEventType,
    taskId: string,
    stageId: string | undefined,
    payload: Record<string, unknown>,
    timestamp?: number,
  ): number;
  /**
   * A stage's `node_started` (`ended` false, at its start, with `started` as payload) or its end:
   * `node_failed` when the record has an error, else `node_completed`, at its completion. The record is
   * made when the stage starts and completed in place before its end is reported. A stage of the root task
   * that nobody receives (no listener, plugin or bus, nothing to redact) is only noted in the run's
   * `deferred` list: `eventsOf` builds the same events from the record. Gives the event's sequence number.
   */
  stage(
    run: Run,
    task: WorkflowTask,
    stage: StageRecord,
    ended: boolean,
    started: Readonly<Record<string, unknown>>,
  ): number;
  /** Every event of the run in sequence order, the deferred ones built now. */
  eventsOf(run: Run): TelemetryEvent[];
  /**
   * The events of the run the database must hold as rows: all but those whose sequence numbers are in
   * `covered` (ascending), which stage rows stand for.
   */
  eventsBesides(run: Run, covered: ReadonlyArray<number>): TelemetryEvent[];
  /** How many events of each type the run has, by type in order of first occurrence. */
  countsOf(run: Run): Record<string, number>;
  /** An event of no run's sequence (a scheduler event for a run not yet known): delivered, not logged. */
  emitLoose(type: TelemetryEventType, taskId: string, payload: Record<string, unknown>): void;
  subscribe(listener: TelemetryListener): () => void;
}

export interface EmitterOptions {
  workflowId: string;
  clock: Clock;
  logger: Logger;
  plugins: PluginHost;
  /** The platform bus (`bus.publish`): every event also goes there as a `workflow:*` event. */
  publish: ((type: WorkflowBusEventType, data: WorkflowBusEventData) => void) | undefined;
  /** Applied to every payload before anyone sees it (credential redaction); identity when there are none. */
  redact: (<T>(value: T) => T) | undefined;
}

/**
 * An event of a run that nobody received when it happened (no listener, plugin or bus, nothing to redact):
 * what is its own, without what every event of the run shares — its id (the run's id and its sequence
 * number), its root task and the metadata — which `eventsOf` adds when it builds the event.
 */
export class QuietEvent {
  constructor(
    readonly type: TelemetryEventType,
    readonly taskId: string,
    readonly stageId: string | undefined,
    readonly timestamp: number,
    readonly payload: Record<string, unknown>,
  ) {}
}

/**
 * The engine's one telemetry path. Delivery is skipped entirely when nobody listens, which keeps the
 * in-memory hot path to one object and one push per event.
 */
/** The runs of deferred sequence numbers of a run that has none. */
const noRanges: ReadonlyArray<number> = Object.freeze([]);

export function createEmitter(options: EmitterOptions): Emitter {
  const { clock, logger, plugins, publish, redact, workflowId } = options;
  const listeners: TelemetryListener[] = [];
  // Shared by every event of this engine: frozen, so no listener can alter what the others see.
  const eventMetadata = Object.freeze({ workflowId });

  function deliver(event: TelemetryEvent): void {
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        logger.warn({ err: error, eventType: event.type }, 'workflow telemetry listener threw; ignored');
      }
    }
    if (plugins.count > 0) plugins.dispatch(event);
    if (publish) {
      try {
        publish(busEventTypeOf(event.type), {
          eventId: event.eventId,
          workflowId,
          rootTaskId: event.rootTaskId,
          taskId: event.taskId,
          ...(event.stageId === undefined ? {} : { nodeId: event.stageId }),
          type: event.type,
          timestamp: event.timestamp,
          payload: event.payload,
        });
      } catch (error) {
        logger.warn({ err: error, eventType: event.type }, 'workflow bus publish threw; ignored');
      }
    }
  }

  /** The event a logged entry stands for (see `QuietEvent`), `seq` its number. */
  function eventOf(run: Run, entry: TelemetryEvent | QuietEvent, seq: number): TelemetryEvent {
    if (!(entry instanceof QuietEvent)) return entry;
    const rootTaskId = run.root.taskId;
    return {
      eventId: `${rootTaskId}:${seq}`,
      rootTaskId,
      taskId: entry.taskId,
      stageId: entry.stageId,
      type: entry.type,
      timestamp: entry.timestamp,
      payload: entry.payload,
      metadata: eventMetadata,
    };
  }

  /**
   * Walks the run's events in sequence order: the deferred ones, in their runs of sequence numbers (see
   * `Run.deferred`), and the logged ones in `run.events`, which hold every other number.
   */
  function replay(
    run: Run,
    visit: (
      built: TelemetryEvent | QuietEvent | undefined,
      stage: StageRecord | undefined,
      ended: boolean,
      seq: number,
    ) => void,
  ): void {
    const { events } = run;
    const ranges = run.deferred ?? noRanges;
    const stages = run.deferredStages!;
    let built = 0;
    let range = 0;
    let offset = 0;
    for (let seq = 1; seq <= run.seq; seq++) {
      if (range < ranges.length && seq === ranges[range]! + offset) {
        const mark = ranges[range + 2]! + offset;
        visit(undefined, stages[mark >> 1], (mark & 1) === 1, seq);
        if (++offset === ranges[range + 1]) {
          range += 3;
          offset = 0;
        }
      } else visit(events[built++], undefined, false, seq);
    }
  }

  /** Notes a root-task stage event nobody receives (see `Run.deferred`); gives its sequence number. */
  function defer(run: Run, stage: StageRecord, ended: boolean): number {
    const seq = ++run.seq;
    let stages = run.deferredStages;
    // The record's place: a new one for a start; for an end, the last one when its start was deferred too.
    let at: number;
    if (!stages) {
      stages = run.deferredStages = [stage];
      at = 0;
    } else if (ended && stages[stages.length - 1] === stage) at = stages.length - 1;
    else at = stages.push(stage) - 1;
    const mark = at * 2 + (ended ? 1 : 0);
    const ranges = run.deferred;
    if (!ranges) run.deferred = [seq, 1, mark];
    else {
      const last = ranges.length - 3;
      const count = ranges[last + 1]!;
      // The next number and the next event (start after end, end after start) of the run of numbers.
      if (ranges[last] + count === seq && ranges[last + 2]! + count === mark) ranges[last + 1] = count + 1;
      else ranges.push(seq, 1, mark);
    }
    return seq;
  }

  function emit(
    run: Run,
    type: TelemetryEventType,
    taskId: string,
    stageId: string | undefined,
    payload: Record<string, unknown>,
    timestamp?: number,
  ): number {
    const seq = ++run.seq;
    if (!redact && listeners.length === 0 && plugins.count === 0 && !publish) {
      run.events.push(new QuietEvent(type, taskId, stageId, timestamp ?? clock.now(), payload));
      return seq;
    }
    const event: TelemetryEvent = {
      eventId: `${run.root.taskId}:${seq}`,
      rootTaskId: run.root.taskId,
      taskId,
      stageId,
      type,
      timestamp: timestamp ?? clock.now(),
      payload: redact ? redact(payload) : payload,
      metadata: eventMetadata,
    };
    run.events.push(event);
    deliver(event);
    return seq;
  }

  return {
    emit,
    stage(run, task, stage, ended, started) {
      if (task === run.root && !redact && listeners.length === 0 && plugins.count === 0 && !publish)
        return defer(run, stage, ended);
      return emit(
        run,
        stageEventType(stage, ended),
        task.taskId,
        stage.nodeId,
        ended ? stageEndPayload(stage) : started,
        ended ? stage.completedAt : stage.startedAt,
      );
    },
    eventsOf(run) {
      // Without deferred stage events, the logged ones are numbered from 1 in order.
      if (!run.deferred) return run.events.map((entry, index) => eventOf(run, entry, index + 1));
      const rootTaskId = run.root.taskId;
      const out: TelemetryEvent[] = [];
      replay(run, (built, stage, ended, seq) => {
        if (built) {
          out.push(eventOf(run, built, seq));
          return;
        }
        out.push(stageEvent(rootTaskId, rootTaskId, stage!, ended, seq, eventMetadata));
      });
      return out;
    },
    eventsBesides(run, covered) {
      const rootTaskId = run.root.taskId;
      const out: TelemetryEvent[] = [];
      let next = 0;
      replay(run, (built, stage, ended, seq) => {
        while (next < covered.length && covered[next]! < seq) next++;
        if (covered[next] === seq) return;
        out.push(
          built
            ? eventOf(run, built, seq)
            : stageEvent(rootTaskId, rootTaskId, stage!, ended, seq, eventMetadata),
        );
      });
      return out;
    },
    countsOf(run) {
      // The walk of `replay`, inlined: this runs at the end of every run. A deferred stage event is counted
      // in a local (its type takes its place in `counts` when first met, which keeps the order of first
      // occurrence) and added at the end: most of a run's events are those, and a store into `counts` per
      // event was most of the walk.
      const { events } = run;
      const ranges = run.deferred ?? noRanges;
      const stages = run.deferredStages!;
      const counts: Record<string, number> = {};
      let started = 0;
      let completed = 0;
      let failed = 0;
      let built = 0;
      let range = 0;
      let offset = 0;
      for (let seq = 1; seq <= run.seq; seq++) {
        if (range < ranges.length && seq === ranges[range]! + offset) {
          const mark = ranges[range + 2]! + offset;
          if ((mark & 1) === 0) {
            if (started++ === 0) counts.node_started ??= 0;
          } else if (stages[mark >> 1]!.error) {
            if (failed++ === 0) counts.node_failed ??= 0;
          } else if (completed++ === 0) counts.node_completed ??= 0;
          if (++offset === ranges[range + 1]) {
            range += 3;
            offset = 0;
          }
        } else {
          const type = events[built++]!.type;
          counts[type] = (counts[type] ?? 0) + 1;
        }
      }
      if (started > 0) counts.node_started! += started;
      if (completed > 0) counts.node_completed! += completed;
      if (failed > 0) counts.node_failed! += failed;
      return counts;
    },
    emitLoose(type, taskId, payload) {
      deliver({
        eventId: `${taskId}:q`,
        rootTaskId: taskId,
        taskId,
        stageId: undefined,
        type,
        timestamp: clock.now(),
        payload,
        metadata: eventMetadata,
      });
    },
    subscribe(listener) {
      listeners.push(listener);
      return () => {
        const index = listeners.indexOf(listener);
        if (index >= 0) listeners.splice(index, 1);
      };
    },
  };
}
