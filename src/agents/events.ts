import type { WorkState } from '../work/index.js';

/** Phases of `agent:progress` (the planner/worker lifecycle plus saturation). */
export type AgentProgressPhase =
  | 'planner-received'
  | 'planner-ready'
  | 'delegated'
  | 'worker-started'
  | 'worker-completed'
  | 'worker-failed'
  | 'worker-cancelled'
  | 'saturated'
  | 'synthesis';

export type AgentRuntimeState = 'idle' | 'listening' | 'thinking' | 'speaking' | 'error';

export interface PlannedTaskSummary {
  workItemId: string;
  title: string;
  description: string;
  agentId: string | null;
}

declare module '../bus/events.js' {
  interface BusEventMap {
    'agent:plan': {
      planId: string;
      agentId: string;
      sessionKey: string;
      goal: string;
      reply: string;
      tasks: PlannedTaskSummary[];
    };
    'agent:progress': {
      phase: AgentProgressPhase;
      message: string;
      agentId?: string;
      sessionKey?: string;
      planId?: string;
      workItemId?: string;
      /** The runtime's own upkeep (memory maintenance), not work anyone asked for. */
      systemWork?: true;
      /** Saturation: how many tasks wait for a worker, and the bound. */
      queueDepth?: number;
      limit?: number;
    };
    /** One task of a plan changed state. */
    'agent:status': {
      planId: string;
      workItemId: string;
      title: string;
      state: WorkState;
      index: number;
      total: number;
      summary?: string;
    };
    /** All tasks of a plan ended; `text` is what the planner posts to the chat. */
    'agent:synthesis': {
      planId: string;
      agentId: string;
      sessionKey: string;
      goal: string;
      text: string;
      tasks: Array<{ workItemId: string; title: string; state: WorkState; summary?: string }>;
    };
    /** A heartbeat sweep or model check for one agent. `message` is set only for a user-visible nudge. */
    'agent:heartbeat': {
      agentId: string;
      kind: 'sweep' | 'model';
      counts: { queued: number; running: number; blocked: number; stalled: number; paused: number };
      changed: boolean;
      message?: string;
      /** Model checks: why no model call was made, or `ok` when the reply was HEARTBEAT_OK. */
      skipped?: 'unchanged' | 'user-turn' | 'outside-active-hours' | 'ok';
    };
    'agent:blocked': {
      agentId: string;
      workItemId: string;
      title: string;
      reason: string;
      /** `blocked` (explicitly or awaiting children) or `stalled` (no lease heartbeat for too long). */
      condition: 'blocked' | 'stalled';
      sinceMs: number;
      /** Speculative follow-up work items proposed for it (paused unless policy allows auto-run). */
      proposals: Array<{ workItemId: string; title: string; rationale: string }>;
    };
    'agent:state': { agentId: string; from: AgentRuntimeState; to: AgentRuntimeState; reason?: string };
    'agent:transition-rejected': {
      agentId: string;
      from: AgentRuntimeState;
      to: AgentRuntimeState;
      reason: string;
    };
    /** An agent moved in the world (a client asked, or its decision loop chose to). */
    'agent:moved': {
      agentId: string;
      from: { x: number; y: number };
      to: { x: number; y: number };
      reason?: string;
    };
    /** The decision loop chose what to do next. */
    'agent:decided': { agentId: string; action: 'move' | 'wait' | 'speak' };
    'agent:spawned': { agentId: string; name: string; role: string };
    'agent:terminated': { agentId: string; forced: boolean };
    /** The agents' message bus, one event per topic. */
    'agent:spoke': { agentId: string; content: string; recipient?: string };
    'agent:message': { from: string; to: string; content: string };
    'agent:broadcast': { agentId: string; data: string };
    'agent:task-assigned': { agentId: string; taskId: string; taskName: string };
    'agent:task-completed': {
      agentId: string;
      taskId: string;
      result: string;
      status: 'completed' | 'failed';
    };
  }
}
