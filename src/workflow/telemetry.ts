import type { BusEventType } from '../bus/index.js';
import { deepFreeze, type Logger } from '../util/index.js';
import type { StageRecord } from './task.js';

/** The engine's 18 telemetry event types, plus the scheduler's three. */
export const telemetryEventTypes = [
  'task_started',
  'task_completed',
  'task_failed',
  'node_started',
  'node_completed',
  'node_failed',
  'routing_decision',
  'routing_branch',
  'routing_split',
  'routing_merge',
  'tool_invoked',
  'tool_completed',
  'tool_failed',
  'context_assembled',
  'context_failed',
  'clone_created',
  'subtask_created',
  'policy_denied',
] as const;
export const schedulerEventTypes = ['task_queued', 'task_dequeued', 'queue_full'] as const;
export type TelemetryEventType = (typeof telemetryEventTypes)[number] | (typeof schedulerEventTypes)[number];

export interface TelemetryEvent {
  /** `<root task id>:<sequence>`: unique, ordered within a run, and identical on replay. */
  eventId: string;
  /** The run (root task) this event belongs to. */
  rootTaskId: string;
  taskId: string;
  /** The node, for node, routing, tool and context events. */
  stageId: string | undefined;
  type: TelemetryEventType;
  timestamp: number;
  payload: Record<string, unknown>;
  metadata: { workflowId: string };
}

export type TelemetryListener = (event: TelemetryEvent) => void;

/**
 * A stage's `node_started` (`ended` false) or its end (`node_failed` when the record has an error, else
 * `node_completed`): everything they say is in the stage record, so a record and the event's sequence
 * number are enough to make them again, the same whether in memory or read back from the database.
 */
export function stageEvent(
  rootTaskId: string,
  taskId: string,
  stage: StageRecord,
  ended: boolean,
  seq: number,
  metadata: { workflowId: string },
): TelemetryEvent {
  return {
    eventId: `${rootTaskId}:${seq}`,
    rootTaskId,
    taskId,
    stageId: stage.nodeId,
    type: stageEventType(stage, ended),
    timestamp: ended ? stage.completedAt : stage.startedAt,
    payload: ended ? stageEndPayload(stage) : Object.freeze({ role: stage.nodeRole, kind: stage.nodeKind }),
    metadata,
  };
}

export function stageEventType(stage: StageRecord, ended: boolean): TelemetryEventType {
  return !ended ? 'node_started' : stage.error ? 'node_failed' : 'node_completed';
}

export function stageEndPayload(stage: StageRecord): Record<string, unknown> {
  const durationMs = stage.completedAt - stage.startedAt;
  return stage.error ? { error: stage.error, durationMs } : { status: stage.nodeStatus, durationMs };
}

/** What a read-only plugin may implement. Every hook receives frozen copies and its return value is ignored. */
export interface WorkflowPlugin {
  id?: string;
  on_event?(event: Readonly<TelemetryEvent>): void | Promise<void>;
  on_startup?(info: Readonly<{ workflowId: string; metadata: unknown }>): void | Promise<void>;
  on_shutdown?(): void | Promise<void>;
}

/** Bus keys under which the engine's events are published on the agentd bus (`workflow:node-completed`, …). */
export type WorkflowBusEventType = Extract<BusEventType, `workflow:${string}`>;
const busTypes = new Map<string, WorkflowBusEventType>();
export function busEventTypeOf(type: TelemetryEventType): WorkflowBusEventType {
  let busType = busTypes.get(type);
  if (!busType) {
    busType = `workflow:${type.replace(/_/g, '-')}` as WorkflowBusEventType;
    busTypes.set(type, busType);
  }
  return busType;
}

/** The payload of every `workflow:*` event on the agentd bus. */
export interface WorkflowBusEventData {
  eventId: string;
  workflowId: string;
  rootTaskId: string;
  taskId: string;
  nodeId?: string;
  type: TelemetryEventType;
  timestamp: number;
  payload: Record<string, unknown>;
}

declare module '../bus/events.js' {
  interface BusEventMap {
    'workflow:task-started': WorkflowBusEventData;
    'workflow:task-completed': WorkflowBusEventData;
    'workflow:task-failed': WorkflowBusEventData;
    'workflow:node-started': WorkflowBusEventData;
    'workflow:node-completed': WorkflowBusEventData;
    'workflow:node-failed': WorkflowBusEventData;
    'workflow:routing-decision': WorkflowBusEventData;
    'workflow:routing-branch': WorkflowBusEventData;
    'workflow:routing-split': WorkflowBusEventData;
    'workflow:routing-merge': WorkflowBusEventData;
    'workflow:tool-invoked': WorkflowBusEventData;
    'workflow:tool-completed': WorkflowBusEventData;
    'workflow:tool-failed': WorkflowBusEventData;
    'workflow:context-assembled': WorkflowBusEventData;
    'workflow:context-failed': WorkflowBusEventData;
    'workflow:clone-created': WorkflowBusEventData;
    'workflow:subtask-created': WorkflowBusEventData;
    'workflow:policy-denied': WorkflowBusEventData;
    'workflow:task-queued': WorkflowBusEventData;
    'workflow:task-dequeued': WorkflowBusEventData;
    'workflow:queue-full': WorkflowBusEventData;
  }
}

/** A deep, frozen copy: what plugins receive, so nothing they do can reach engine state. */
export function frozenCopy<T>(value: T): T {
  return deepFreeze(structuredClone(value));
}

export interface PluginHost {
  readonly count: number;
  dispatch(event: TelemetryEvent): void;
  startup(info: { workflowId: string; metadata: unknown }): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Runs plugins as isolated observers: each gets its own frozen copy, a throw or a rejected promise is logged
 * and counted, never propagated, and hooks are not awaited by the engine (a slow plugin cannot stall a run).
 */
export function createPluginHost(
  plugins: ReadonlyArray<WorkflowPlugin>,
  logger: Logger,
): PluginHost & { failures: number } {
  const host = {
    failures: 0,
    count: plugins.length,
    dispatch(event: TelemetryEvent) {
      for (const plugin of plugins) {
        if (!plugin.on_event) continue;
        invoke(plugin, 'on_event', () => plugin.on_event!(frozenCopy(event)));
      }
    },
    async startup(info: { workflowId: string; metadata: unknown }) {
      for (const plugin of plugins) {
        if (plugin.on_startup) await invoke(plugin, 'on_startup', () => plugin.on_startup!(frozenCopy(info)));
      }
    },
    async shutdown() {
      for (const plugin of plugins)
        if (plugin.on_shutdown) await invoke(plugin, 'on_shutdown', () => plugin.on_shutdown!());
    },
  };
  function invoke(
    plugin: WorkflowPlugin,
    hook: string,
    call: () => void | Promise<void>,
  ): Promise<void> | undefined {
    const report = (error: unknown) => {
      host.failures++;
      logger.warn(
        { plugin: plugin.id, hook, err: error },
        'workflow plugin failed; it is isolated and the run continues',
      );
    };
    try {
      const result = call();
      if (result && typeof (result as Promise<void>).then === 'function')
        return (result as Promise<void>).then(undefined, report);
    } catch (error) {
      report(error);
    }
    return undefined;
  }
  return host;
}
