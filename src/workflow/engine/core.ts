import type { ModelRetryOptions } from '../../model/index.js';
import type { Policy } from '../../tools/index.js';
import type { Clock, IdGenerator, Logger } from '../../util/index.js';
import type { AdapterRegistry } from '../adapters.js';
import type { RunAgentWithTools } from '../agent-node.js';
import type { ArtifactStore } from '../artifacts.js';
import type { FreshMap } from '../fresh-map.js';
import type { LoadedWorkflow } from '../loader.js';
import type { AgentDefinition, ContextProfile } from '../manifest-schemas.js';
import type { MemoryStore, MemoryStoreKind, WorkflowMemoryItem } from '../memory-store.js';
import type { WorkflowMetrics } from '../metrics.js';
import type { WorkflowTask } from '../task.js';
import type { LoadedTool, WorkflowFunction } from '../tools.js';
import type { Emitter } from './emitter.js';
import type { PersistWrite } from './persistence.js';
import { type NewTaskFields, newTaskRecord, type Run } from './run-state.js';

export interface MemoryAddOptions {
  taskId?: string;
  tags?: string[];
  protected?: boolean;
  metadata?: Record<string, unknown>;
}

/**
 * What every step of the engine works with: the loaded workflow, its bound tools and agents, the platform
 * services it was given, and the few operations that touch engine-wide state. Built once per engine by
 * `setup.ts`; the steps (`execute-stage`, `route`, `conclude`, …) are plain functions of it and a run.
 */
export interface EngineCore {
  readonly workflow: LoadedWorkflow;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly idGenerator: IdGenerator;
  /** Base of tool roots and of file access by functions. */
  readonly workDir: string;
  readonly functions: Readonly<Record<string, WorkflowFunction>>;
  readonly tools: ReadonlyMap<string, LoadedTool>;
  readonly agents: ReadonlyMap<string, AgentDefinition>;
  readonly adapters: AdapterRegistry;
  readonly runAgentWithTools: RunAgentWithTools | undefined;
  readonly modelRetry: ModelRetryOptions | undefined;
  /** policy.yaml, evaluated by the platform's tool policy (the same rules engine as every tool call). */
  readonly policy: Policy;
  readonly metrics: WorkflowMetrics;
  readonly artifacts: ArtifactStore;
  /** Compiled `schemas/*.json` checks by schema id: a message when the value does not match. */
  readonly schemaChecks: ReadonlyMap<string, (value: unknown) => string | undefined>;
  /** Context profiles by id, `global` included. */
  readonly profiles: ReadonlyMap<string, ContextProfile>;
  readonly stores: Readonly<Record<MemoryStoreKind, MemoryStore>>;
  /** Credential redaction of anything leaving a stage; undefined when the workflow has no secrets. */
  readonly redact: (<T>(value: T) => T) | undefined;
  readonly redactText: (text: string) => string;
  /** The tasks of the engine's runs other than their root tasks (clones, subtasks), by task id. */
  readonly taskIndex: FreshMap<string, Run>;
  readonly emitter: Emitter;
  /** Runs are written to the database as they execute. */
  readonly durable: boolean;
  persist(run: Run, write: PersistWrite): void;
  addMemory(store: MemoryStoreKind, payload: unknown, options: MemoryAddOptions): Promise<WorkflowMemoryItem>;
}

/** Creates a task of `run` and indexes it. */
export function addTask(core: EngineCore, run: Run, fields: NewTaskFields): WorkflowTask {
  const task = newTaskRecord(core.workflow.id, core.clock.now(), fields);
  run.tasks.set(task.taskId, task);
  core.taskIndex.set(task.taskId, run);
  return task;
}

/** A task record as persisted: with credentials redacted when the workflow has any. */
export function cleanTask(core: EngineCore, task: WorkflowTask): WorkflowTask {
  return core.redact ? core.redact(task) : task;
}

/** A denial by policy.yaml: the policy that decided (its name) and why. */
export interface PolicyDenial {
  policy: string;
  reason: string | undefined;
}

type PolicyTarget = 'tool' | 'context' | 'node';
/**
 * Decisions per policy, target and id (`null`: allowed). A workflow's policy is its policy.yaml, fixed for
 * the engine's life, and these checks carry no agent or resource: the answer for a node, profile or tool
 * never changes, and asking anew cost a request and a decision object on every stage.
 */
const decisions = new WeakMap<Policy, Record<PolicyTarget, Map<string, PolicyDenial | null>>>();
// The policy asked last and its decisions: an engine asks about every stage, so most lookups stop here.
let lastPolicy: Policy | undefined;
let lastDecisions: Record<PolicyTarget, Map<string, PolicyDenial | null>> | undefined;

/** Asks the policy about a node, a context profile or a tool; undefined when it is allowed. */
export function policyDenial(
  core: EngineCore,
  target: PolicyTarget,
  targetId: string,
): PolicyDenial | undefined {
  let known = core.policy === lastPolicy ? lastDecisions : decisions.get(core.policy);
  if (!known) {
    known = { tool: new Map(), context: new Map(), node: new Map() };
    decisions.set(core.policy, known);
  }
  lastPolicy = core.policy;
  lastDecisions = known;
  const byId = known[target];
  let denial = byId.get(targetId);
  if (denial === undefined) {
    const decision = core.policy.check({ target, targetId });
    const rule = decision.rule ?? '';
    denial = decision.allowed
      ? null
      : { policy: rule.slice(0, rule.lastIndexOf('#')) || 'default', reason: decision.reason };
    byId.set(targetId, denial);
  }
  return denial ?? undefined;
}
