import type { Clock, Logger } from '../../util/index.js';
import {
  busEventTypeOf,
  type PluginHost,
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
  ): void;
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
 * The engine's one telemetry path. Delivery is skipped entirely when nobody listens, which keeps the
 * in-memory hot path to one object and one push per event.
 */
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

  return {
    emit(run, type, taskId, stageId, payload, timestamp) {
      const event: TelemetryEvent = {
        eventId: `${run.root.taskId}:${++run.seq}`,
        rootTaskId: run.root.taskId,
        taskId,
        stageId,
        type,
        timestamp: timestamp ?? clock.now(),
        payload: redact ? redact(payload) : payload,
        metadata: eventMetadata,
      };
      run.events.push(event);
      if (listeners.length > 0 || plugins.count > 0 || publish) deliver(event);
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
