import { existsSync, realpathSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { MethodTable } from '../gateway/index.js';
import { OperatorScopes } from '../gateway/index.js';
import type { LanguageModel } from '../model/index.js';
import type { SqlDatabase } from '../store/index.js';
import type { Logger } from '../util/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import {
  busEventTypeOf,
  createWorkflowEngine,
  createWorkflowMethodHandlers,
  loadWorkflow,
  type RunAgentWithTools,
  type RunOwner,
  telemetryEventTypes,
  type WorkflowEngine,
  workflowCancelParamsSchema,
  workflowRunParamsSchema,
  workflowStatusParamsSchema,
} from '../workflow/index.js';
import type { WorkflowDispatch } from './workflow-dispatch.js';

export interface WorkflowMethods {
  /**
   * `workflow.run` in-process, waiting for the result. The embedding program's own directories are trusted;
   * `confined` (a client's request, e.g. over MCP) accepts only directories under the configured roots.
   */
  run(params: {
    dir: string;
    input?: unknown;
    confined?: boolean;
  }): Promise<{ taskId: string; result: unknown }>;
  /** The directories workflows may be loaded from (resolved). */
  roots: string[];
  engineFor(dir: string): Promise<WorkflowEngine>;
  /** Engines loaded so far (each workflow directory that has been run). */
  loadedEngines(): Promise<WorkflowEngine[]>;
  close(): Promise<void>;
}

function dispatchOption(dispatch: WorkflowDispatch | undefined, workflowId: string) {
  if (!dispatch) return {};
  return {
    dispatch: (
      taskId: string,
      execute: (signal?: AbortSignal) => Promise<'completed' | 'failed'>,
      signal: AbortSignal,
    ) => dispatch.dispatch(taskId, execute, workflowId, signal),
  };
}

/** The `workflows:` section of agentd.yaml. */
export const workflowsConfigSchema = z.object({
  /**
   * Directories whose workflows `workflow.run` may run (paths relative to the config file). Default:
   * `<state dir>/workflow-library`. Never the agent's workspace: a workflow names code to run.
   */
  dirs: z.array(z.string().min(1)).optional(),
  /**
   * Days a durable run is kept after it ended (fractions allowed); 0 keeps every run. Pruned at start and
   * hourly (see docs/workflows.md, "Retention").
   */
  retainEndedDays: z.number().nonnegative().default(30),
  /**
   * How long this process counts as running its durable runs after it last renewed its lease (renewed every
   * third of it while it has runs). A run whose process died is concluded `INTERRUPTED` once the lease
   * lapsed, by the next sweep of a live process, swept as often (see docs/workflows.md, "Interrupted runs").
   */
  runLeaseMs: z.number().int().min(100).max(3_600_000).default(30_000),
});

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * `workflow.run|status|cancel` on the gateway. A workflow directory is code (its tools.yaml names modules to
 * run), so only directories below the configured roots are accepted — compared by real path, so a symbolic
 * link in a root cannot lead elsewhere — and running one needs operator.admin.
 */
export function registerWorkflowMethods(options: {
  methods: MethodTable;
  bus: Bus;
  db: SqlDatabase;
  stateDir: string;
  allowedRoots: string[];
  resolveModel(name: string, credential?: { apiKey: string; baseUrl?: string }): LanguageModel;
  runAgentWithTools: RunAgentWithTools;
  /** Read when an engine is created: runs go through the work queue when a dispatch is there. */
  dispatch: () => WorkflowDispatch | undefined;
  /** The lease under which every engine of this process writes its runs (docs/workflows.md, "Interrupted runs"). */
  runOwner: RunOwner;
  logger: Logger;
}): WorkflowMethods {
  const engines = new Map<string, Promise<WorkflowEngine>>();
  const roots = options.allowedRoots.map((root) => resolve(root));
  // Directories the embedding program itself asked to run (`run` below): its own code, not a client's.
  const trustedDirs = new Set<string>();
  let stopWatching: (() => void) | undefined;

  const engineFor = (dir: string): Promise<WorkflowEngine> => {
    const path = realOrSelf(resolve(roots[0] ?? '/', dir));
    if (!trustedDirs.has(path) && !roots.some((root) => isInside(realOrSelf(root), path))) {
      return Promise.reject(
        new UserInputError({
          code: ErrorCodes.forbidden,
          message: `workflow ${dir} is not in a configured workflow directory (workflows.dirs: ${roots.join(', ') || 'none'})`,
          details: { dir },
        }),
      );
    }
    if (!existsSync(join(path, 'workflow.yaml'))) {
      return Promise.reject(
        new UserInputError({
          code: ErrorCodes.notFound,
          message: `no workflow at ${dir}: the directory must contain workflow.yaml`,
        }),
      );
    }
    let engine = engines.get(path);
    if (!engine) {
      const dispatch = options.dispatch();
      // A run whose work item ends before a worker takes it (work.cancel, agent.control) ends with it.
      if (dispatch) stopWatching ??= dispatch.watch(options.bus);
      engine = loadWorkflow(path).then((workflow) =>
        createWorkflowEngine({
          workflow,
          resolveModel: (name, { credential }) =>
            options.resolveModel(
              name,
              credential
                ? {
                    apiKey: credential.apiKey,
                    ...(credential.baseUrl ? { baseUrl: credential.baseUrl } : {}),
                  }
                : undefined,
            ),
          database: options.db,
          runOwner: options.runOwner,
          stateDir: join(options.stateDir, 'workflows', workflow.id),
          workDir: path,
          publish: (type, data) => options.bus.publish(type, data),
          runAgentWithTools: options.runAgentWithTools,
          ...dispatchOption(dispatch, workflow.id),
          logger: options.logger,
        }),
      );
      // A directory that fails to load is not cached, so fixing it and retrying works.
      engine.catch(() => engines.delete(path));
      engines.set(path, engine);
    }
    return engine;
  };

  const handlers = createWorkflowMethodHandlers({ engineFor });
  const { read, write, admin } = OperatorScopes;
  options.methods.register('workflow.run', {
    scopes: [admin],
    params: workflowRunParamsSchema,
    handler: (params, context) => handlers.run(params, { signal: context.signal }),
  });
  // `agentd eval --url`: the evaluation suites of a workflow in the server's library, run there.
  options.methods.register('workflow.eval', {
    scopes: [admin],
    params: z.object({
      dir: z.string().min(1),
      suites: z.array(z.string().min(1)).min(1).optional(),
    }),
    handler: async ({ dir, suites }) => ({
      report: await (await engineFor(dir)).runEvaluations(suites ? { suites } : {}),
    }),
  });
  options.methods.register('workflow.status', {
    scopes: [read],
    params: workflowStatusParamsSchema,
    handler: (params) => handlers.status(params),
  });
  options.methods.register('workflow.cancel', {
    scopes: [write],
    params: workflowCancelParamsSchema,
    handler: (params) => handlers.cancel(params),
  });
  for (const type of telemetryEventTypes) {
    const busType = busEventTypeOf(type);
    options.methods.forwardBusEvent(busType, busType.replace(':', '.'), { scopes: [read] });
  }

  return {
    async run({ dir, input, confined = false }) {
      // Confined, `dir` goes to engineFor as a client's would: relative to the first root, checked by real path.
      const target = confined ? dir : resolve(dir);
      if (!confined) trustedDirs.add(realOrSelf(target));
      const outcome = (await handlers.run({ dir: target, input, wait: true })) as {
        taskId: string;
        result?: unknown;
      };
      return { taskId: outcome.taskId, result: outcome.result };
    },
    roots,
    engineFor,
    async loadedEngines() {
      const ready = await Promise.allSettled([...engines.values()]);
      return ready.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    },
    async close() {
      for (const engine of engines.values()) await engine.then((ready) => ready.close()).catch(() => {});
      // Closing cancelled the runs still waiting for a worker: their items' cancels land before the store closes.
      await options.dispatch()?.idle();
      stopWatching?.();
      stopWatching = undefined;
    },
  };
}
