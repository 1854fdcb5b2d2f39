import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { MethodTable } from '../gateway/index.js';
import { OperatorScopes } from '../gateway/index.js';
import type { SqlDatabase } from '../store/index.js';
import type { Logger } from '../util/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import { loadWorkflow, loadWorkflowEngine } from '../workflow/index.js';
import type { WorkflowMethods } from './workflow-methods.js';

export interface WorkflowSummary {
  dir: string;
  id: string;
  description: string | null;
  nodes: Array<{ id: string; name: string | null; role: string; kind: string }>;
  edges: Array<{ from: string; to: string; label: string | null }>;
}

export interface WorkflowRunSummary {
  taskId: string;
  workflowId: string;
  startedAt: number;
  endedAt: number | null;
  status: 'running' | 'completed' | 'failed';
}

const maxRuns = 100;

/** Workflow directories the runtime offers: each root itself, and one level below it and below `workflows/`. */
function workflowDirs(roots: ReadonlyArray<string>): string[] {
  const found = new Set<string>();
  const scan = (folder: string) => {
    if (!existsSync(folder)) return;
    let entries: string[];
    try {
      entries = readdirSync(folder, { withFileTypes: true })
        .filter(
          (entry) => entry.isDirectory() && !entry.name.startsWith('.') && entry.name !== 'node_modules',
        )
        .map((entry) => entry.name);
    } catch {
      return;
    }
    for (const name of entries.sort()) {
      const dir = join(folder, name);
      if (existsSync(join(dir, 'workflow.yaml'))) found.add(dir);
    }
  };
  for (const root of roots) {
    if (existsSync(join(root, 'workflow.yaml'))) found.add(root);
    scan(root);
    scan(join(root, 'workflows'));
    scan(join(root, 'examples'));
  }
  return [...found];
}

/**
 * What a dashboard needs to draw workflows: `workflow.list` (the DAG of each workflow it may run),
 * `workflow.runs` (recent runs of this process) and `workflow.inspect` (stage records, routing path,
 * events and artifacts of one run). Node status changes arrive as the `workflow.*` events.
 */
export function registerWorkflowViewMethods(options: {
  methods: MethodTable;
  bus: Bus;
  workflows: WorkflowMethods;
  /** The database the engines write their runs to: a run no loaded engine holds is read from it. */
  db: SqlDatabase;
  logger: Logger;
}): void {
  const { methods, bus, workflows } = options;
  const { read } = OperatorScopes;
  const runs = new Map<string, WorkflowRunSummary>();

  bus.on('workflow:task-started', (event) => {
    const data = event.data;
    if (data.taskId !== data.rootTaskId) return;
    runs.set(data.taskId, {
      taskId: data.taskId,
      workflowId: data.workflowId,
      startedAt: data.timestamp,
      endedAt: null,
      status: 'running',
    });
    if (runs.size > maxRuns) runs.delete(runs.keys().next().value!);
  });
  const ended =
    (status: 'completed' | 'failed') =>
    (event: { data: { taskId: string; rootTaskId: string; timestamp: number } }) => {
      const run = runs.get(event.data.rootTaskId);
      if (!run || event.data.taskId !== event.data.rootTaskId) return;
      run.status = status;
      run.endedAt = event.data.timestamp;
    };
  bus.on('workflow:task-completed', ended('completed'));
  bus.on('workflow:task-failed', ended('failed'));

  methods.register('workflow.list', {
    scopes: [read],
    params: z.object({}).passthrough(),
    async handler() {
      const summaries: WorkflowSummary[] = [];
      for (const dir of workflowDirs(workflows.roots)) {
        try {
          // Plugins are code; listing must not run them.
          const workflow = await loadWorkflow(dir, { loadPlugins: false });
          const manifest = workflow.manifests.workflow;
          summaries.push({
            dir,
            id: workflow.id,
            description: manifest.description ?? null,
            nodes: manifest.nodes.map((node) => ({
              id: node.id,
              name: node.name ?? null,
              role: node.role,
              kind: node.kind,
            })),
            edges: manifest.edges.map((edge) => ({
              from: edge.from,
              to: edge.to,
              label: edge.label ?? null,
            })),
          });
        } catch (error) {
          options.logger.debug({ err: error, dir }, 'skipping a workflow directory that does not load');
        }
      }
      return { workflows: summaries };
    },
  });

  methods.register('workflow.runs', {
    scopes: [read],
    params: z.object({ limit: z.number().int().min(1).max(maxRuns).default(20) }),
    handler: ({ limit }) => ({ runs: [...runs.values()].reverse().slice(0, limit) }),
  });

  methods.register('workflow.inspect', {
    scopes: [read],
    params: z.object({ taskId: z.string().min(1).max(256) }),
    async handler({ taskId }) {
      // A run an engine holds in memory (live, or among its retained runs) is its engine's to show.
      for (const engine of await workflows.loadedEngines()) {
        if (engine.status(taskId) === undefined) continue;
        const report = await engine.inspect(taskId);
        if (report) return { report };
      }
      // Any other run is read from the database once, as the in-process `agentd inspect` reads it (its
      // records were redacted when written), whichever workflow it is of and whether or not that workflow is
      // loaded here: before, each loaded engine read the database in turn, and the first answered any run
      // with its own workflow's metadata.
      const { createSqlRecordStore, inspectPersistedRun } = await loadWorkflowEngine();
      const report = await inspectPersistedRun(createSqlRecordStore(options.db), taskId);
      if (report) return { report };
      throw new UserInputError({ code: ErrorCodes.notFound, message: `no workflow run ${taskId}` });
    },
  });
}
