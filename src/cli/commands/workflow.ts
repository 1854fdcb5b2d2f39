import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import type { LanguageModel } from '../../model/index.js';
import type { SqlDatabase, Store } from '../../store/index.js';
import { ErrorCodes, silentLogger, UserInputError } from '../../util/index.js';
import type {
  EvaluationReport,
  InspectionReport,
  LoadedWorkflow,
  RunAgentWithTools,
  TelemetryEvent,
  WorkflowBusEventData,
  WorkflowBusEventType,
  WorkflowEngine,
} from '../../workflow/index.js';
import { loadModel, loadStore, loadWorkflowEngine } from '../lazy-modules.js';
import { ExitCodes, reportError, terminalOf } from '../output.js';
import { createProgressDisplay, type ProgressDisplay } from '../progress.js';
import { connectFromOptions, type RemoteOptions, tokenOption, urlOption } from '../remote.js';
import { paintState, type Terminal } from '../terminal.js';

export interface WorkflowCommandDeps {
  /**
   * `provider/model` → model; `undefined` means the configured default. Credentials come from the workflow.
   * Called once `prepare` has resolved.
   */
  resolveModel(name?: string, options?: { apiKey?: string; baseUrl?: string }): LanguageModel;
  /** Loads what `resolveModel` needs, before an engine is made (the CLI loads the runtime's modules then). */
  prepare?(): Promise<void>;
  /** Where runs are kept (the CLI reads it from the configuration, which it loads only for a command using it). */
  storeLocation(): Promise<WorkflowStoreLocation>;
  stdout(text: string): void;
  stderr(text: string): void;
  /** Input of `agentd repl`; default `process.stdin`. */
  stdin?: NodeJS.ReadableStream;
  /** The global `--model` flag, when given: used for every agent instead of agents.yaml's `llm`. */
  modelOverride?: () => string | undefined;
  /** The engage loop for agent nodes that list tools (the runtime supplies one built on runEngage). */
  runAgentWithTools?: RunAgentWithTools;
  /** Forwarded engine events, e.g. onto the agentd bus. */
  publish?: (type: WorkflowBusEventType, data: WorkflowBusEventData) => void;
  /** Sets the process exit code (the caller decides when to exit). */
  setExitCode(code: number): void;
  env?: Record<string, string | undefined>;
  /** Base of relative paths and of tool roots; default `process.cwd()`. */
  cwd?: string;
  /** Colour and live progress; default: the process's when `stdout` is its writer, plain otherwise. */
  terminal?: Terminal;
}

export interface WorkflowStoreLocation {
  /**
   * agentd's state directory: runs and persistent memory go to its store (`agentd.db`, or `databaseUrl`);
   * REPL history and evaluation baselines to `<stateDir>/workflows/<workflow id>`.
   */
  stateDir: string;
  /** The configured Postgres URL, when agentd runs on Postgres: the store is opened there instead. */
  databaseUrl?: string;
}

function workflowStateDir(stateDir: string, workflowId: string): string {
  return join(stateDir, 'workflows', workflowId);
}

async function fail(deps: WorkflowCommandDeps, error: unknown, json: boolean): Promise<void> {
  const { WorkflowValidationError } = await loadWorkflowEngine();
  // A validation failure's message lists the problems; its code would only repeat INVALID_CONFIG.
  if (!json && error instanceof WorkflowValidationError) {
    deps.stderr(`agentd: ${error.message}\n`);
    deps.setExitCode(ExitCodes.usage);
    return;
  }
  deps.setExitCode(reportError(deps, error, json));
}

/** Models resolved for a workflow's agents that are the offline one (their output is not real work). */
interface OfflineModelUse {
  used: boolean;
}

/** The platform store the CLI's runs are kept in: the same database the server uses. */
async function openStore(location: WorkflowStoreLocation): Promise<Store> {
  const { createStore } = await loadStore();
  return createStore({
    stateDir: location.stateDir,
    ...(location.databaseUrl ? { databaseUrl: location.databaseUrl } : {}),
    logger: silentLogger,
  });
}

/**
 * An engine over the platform store; closing it closes the store too. `workflowDir` is the workflow's own
 * directory under the state directory (REPL history, evaluation baselines).
 */
async function openEngine(
  deps: WorkflowCommandDeps,
  dir: string,
  offline: OfflineModelUse = { used: false },
): Promise<WorkflowEngine & { workflowDir: string }> {
  const cwd = deps.cwd ?? process.cwd();
  const { loadWorkflow } = await loadWorkflowEngine();
  const workflow = await loadWorkflow(resolve(cwd, dir));
  const location = await deps.storeLocation();
  const workflowDir = workflowStateDir(location.stateDir, workflow.id);
  const store = await openStore(location);
  try {
    const engine = await createEngine(deps, workflow, store.db, { cwd, workflowDir }, offline);
    return {
      ...engine,
      workflowDir,
      async close() {
        await engine.close();
        await store.close();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

async function createEngine(
  deps: WorkflowCommandDeps,
  workflow: LoadedWorkflow,
  database: SqlDatabase,
  { cwd, workflowDir }: { cwd: string; workflowDir: string },
  offline: OfflineModelUse,
): Promise<WorkflowEngine> {
  await deps.prepare?.();
  const { createWorkflowEngine } = await loadWorkflowEngine();
  const override = deps.modelOverride?.();
  return createWorkflowEngine({
    workflow,
    resolveModel: (name, { credential }) => {
      const model = deps.resolveModel(
        name,
        credential
          ? { apiKey: credential.apiKey, ...(credential.baseUrl ? { baseUrl: credential.baseUrl } : {}) }
          : undefined,
      );
      if (model.provider === 'local') offline.used = true;
      return model;
    },
    database,
    stateDir: workflowDir,
    workDir: cwd,
    ...(override ? { modelOverride: override } : {}),
    ...(deps.runAgentWithTools ? { runAgentWithTools: deps.runAgentWithTools } : {}),
    ...(deps.publish ? { publish: deps.publish } : {}),
    ...(deps.env ? { env: deps.env } : {}),
  });
}

/** One line per node event, for humans watching a run. */
export function formatProgress(event: TelemetryEvent): string | undefined {
  const where =
    event.taskId === event.rootTaskId ? '' : ` [${event.taskId.slice(event.rootTaskId.length + 1)}]`;
  switch (event.type) {
    case 'node_started':
      return `▸ ${event.stageId} (${String(event.payload.role)})${where}`;
    case 'node_completed':
      return `✓ ${event.stageId} ${String(event.payload.durationMs)} ms${event.payload.status === 'partial' ? ' (partial)' : ''}${where}`;
    case 'node_failed': {
      const error = event.payload.error as { code: string; message: string };
      return `✗ ${event.stageId} ${error.code}: ${error.message}${where}`;
    }
    case 'routing_decision':
      return `  → ${String(event.payload.label)}${where}`;
    case 'clone_created':
    case 'subtask_created':
      return `  + ${event.type === 'clone_created' ? 'clone' : 'subtask'} ${event.taskId}`;
    default:
      return undefined;
  }
}

/**
 * Shows an engine event on `display`: a node's line is live from its start to its end (keyed by task and
 * node, so clones and subtasks each have theirs), every other event is a line of its own.
 */
export function showProgress(display: ProgressDisplay, event: TelemetryEvent): void {
  const line = formatProgress(event);
  if (!line) return;
  const key =
    event.type === 'node_started' || event.type === 'node_completed' || event.type === 'node_failed'
      ? `${event.taskId}/${event.stageId}`
      : undefined;
  display.update(line, key === undefined ? {} : { key, done: event.type !== 'node_started' });
}

function progressFor(deps: WorkflowCommandDeps): ProgressDisplay {
  return createProgressDisplay(deps.stderr, terminalOf(deps));
}

/** What `run` reads of a run's result, whether it ran here or on a server. */
interface PrintedRunResult {
  status: string;
  taskId: string;
  output?: unknown;
  error?: { code: string; message: string };
  recordsNotWritten?: { code: string; message: string };
}

/**
 * Prints the result of `workflow.run` and sets the exit code: 1 for a failed run, 3 when the run's records
 * could not all be written (a full disk), said on stderr too, since a script reading only the output would
 * otherwise take the run for a stored one.
 */
function printRunResult(deps: WorkflowCommandDeps, result: PrintedRunResult, json: boolean): void {
  if (result.recordsNotWritten) {
    const { code, message } = result.recordsNotWritten;
    deps.stderr(`agentd: task ${result.taskId}: ${message} (${code})\n`);
    deps.setExitCode(ExitCodes.unavailable);
  } else if (result.status === 'failure') deps.setExitCode(ExitCodes.failure);
  if (json) {
    deps.stdout(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  deps.stdout(
    `[${result.status}] task ${result.taskId}${result.error ? ` — ${result.error.code}: ${result.error.message}` : ''}\n`,
  );
  deps.stdout(
    `${typeof result.output === 'string' ? result.output : JSON.stringify(result.output, null, 2)}\n`,
  );
}

/**
 * `run --url`: `workflow.run` on the server, with the progress of this run from its `workflow.*` events
 * (the first task that starts after the request is this run's root).
 */
async function runRemote(
  deps: WorkflowCommandDeps,
  dir: string,
  input: unknown,
  options: RemoteOptions & { json?: boolean; quiet?: boolean },
): Promise<void> {
  const client = await connectFromOptions(options);
  try {
    let rootTaskId: string | undefined;
    const display = progressFor(deps);
    if (!options.quiet)
      client.onEvent((event, payload) => {
        if (!event.startsWith('workflow.') || typeof payload?.rootTaskId !== 'string') return;
        if (rootTaskId === undefined && event === 'workflow.task-started') rootTaskId = payload.rootTaskId;
        if (payload.rootTaskId !== rootTaskId) return;
        showProgress(display, { ...payload, stageId: payload.nodeId } as TelemetryEvent);
      });
    const { taskId, result } = await client.call<{
      taskId: string;
      result: Omit<PrintedRunResult, 'taskId'>;
    }>('workflow.run', { dir, ...(input !== null ? { input } : {}) }, { timeoutMs: remoteRunTimeoutMs });
    printRunResult(deps, { ...result, taskId }, options.json === true);
  } finally {
    await client.close();
  }
}

/** How long `run --url` waits for the server's run to end. */
const remoteRunTimeoutMs = 3_600_000;

function parseInput(options: { input?: string; inputFile?: string }, cwd: string): unknown {
  if (options.input !== undefined && options.inputFile !== undefined) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'give either --input or --input-file, not both',
    });
  }
  const text =
    options.inputFile !== undefined ? readFileSync(resolve(cwd, options.inputFile), 'utf8') : options.input;
  if (text === undefined) return null;
  try {
    return JSON.parse(text);
  } catch {
    // Plain text is the request, in the shape the REPL gives a typed line: `--input "Create a note about …"`.
    return { request: text };
  }
}

/**
 * Workflow databases that earlier versions kept per workflow (`<stateDir>/workflows/<id>/workflow.db`):
 * read only, so runs recorded there can still be inspected.
 */
function workflowDatabases(stateDir: string): string[] {
  const root = join(stateDir, 'workflows');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .map((name) => join(root, name, 'workflow.db'))
    .filter((path) => existsSync(path));
}

function printReport(deps: WorkflowCommandDeps, report: InspectionReport): void {
  const { summary } = report;
  const { color } = terminalOf(deps);
  deps.stdout(
    `task ${report.task.taskId} (${summary.workflowId}): ${paintState(color, summary.status ?? report.task.state)}\n`,
  );
  deps.stdout(`path: ${summary.path.join(' → ')}\n`);
  for (const stage of report.history) {
    deps.stdout(
      `  ${String(stage.index).padStart(2)}. ${stage.nodeId.padEnd(24)} ${paintState(color, stage.nodeStatus, stage.nodeStatus.padEnd(8))} ${stage.completedAt - stage.startedAt} ms${stage.error ? `  ${stage.error.code}: ${stage.error.message}` : ''}\n`,
    );
  }
  if (report.lineage.length > 1) {
    deps.stdout('lineage:\n');
    for (const task of report.lineage)
      deps.stdout(`  ${task.taskId} ${task.lineageType ?? 'root'} ${task.status ?? task.state}\n`);
  }
  deps.stdout(
    `events: ${Object.entries(summary.eventCounts)
      .map(([type, count]) => `${type}=${count}`)
      .join(' ')}\n`,
  );
  deps.stdout(`artifacts: ${report.artifacts.length}\n`);
  deps.stdout(`output: ${JSON.stringify(report.output, null, 2)}\n`);
}

/**
 * Adds `agentd workflow validate <dir>`, `agentd run <dir>`, `agentd eval <dir>`, `agentd inspect <taskId>`
 * and `agentd repl <dir>` to the program.
 */
export function registerWorkflowCommands(program: Command, deps: WorkflowCommandDeps): void {
  const cwd = () => deps.cwd ?? process.cwd();

  program
    .command('workflow')
    .description('workflow manifests')
    .command('validate <dir>')
    .description('load a workflow directory through all seven load steps and report every problem')
    .option('--json', 'print the result as JSON')
    .action(async (dir: string, options: { json?: boolean }) => {
      const { loadWorkflow, WorkflowValidationError } = await loadWorkflowEngine();
      try {
        // Validation runs no code of the workflow: modules are located and confined, never imported.
        const workflow = await loadWorkflow(resolve(cwd(), dir), {
          loadPlugins: false,
          importModules: false,
        });
        const summary = {
          valid: true,
          workflowId: workflow.id,
          nodes: workflow.dag.order.length,
          edges: workflow.manifests.workflow.edges.length,
          defaultStart: workflow.dag.defaultStartId,
          metadata: workflow.metadata,
        };
        if (options.json) deps.stdout(`${JSON.stringify(summary, null, 2)}\n`);
        else
          deps.stdout(
            `${workflow.id}: valid (${summary.nodes} nodes, ${summary.edges} edges, start "${summary.defaultStart}")\n`,
          );
      } catch (error) {
        if (options.json && error instanceof WorkflowValidationError) {
          deps.stdout(`${JSON.stringify({ valid: false, issues: error.issues }, null, 2)}\n`);
          deps.setExitCode(ExitCodes.usage);
        } else await fail(deps, error, options.json === true);
      }
    });

  program
    .command('run <dir>')
    .description('run a workflow once and print its result, showing node progress as it goes')
    .option('--input <json>', 'the input: JSON, or plain text as the request')
    .option('--input-file <file>', 'read the input from a file (JSON or text)')
    .option('--json', 'print the result as JSON on stdout (progress still goes to stderr)')
    .option('--quiet', 'no progress display')
    .addOption(
      urlOption("run it on a running agentd gateway (<dir> is then the server's path, in workflows.dirs)"),
    )
    .addOption(tokenOption())
    .action(
      async (
        dir: string,
        options: RemoteOptions & { input?: string; inputFile?: string; json?: boolean; quiet?: boolean },
      ) => {
        let engine: WorkflowEngine | undefined;
        try {
          const input = parseInput(options, cwd());
          if (options.url) {
            await runRemote(deps, dir, input, options);
            return;
          }
          const offline: OfflineModelUse = { used: false };
          engine = await openEngine(deps, dir, offline);
          if (!options.quiet) {
            const display = progressFor(deps);
            engine.subscribe((event) => showProgress(display, event));
          }
          const result = await engine.run(input);
          printRunResult(deps, result, options.json === true);
          // Said on stderr so `--json` output stays machine-readable; documents carry their own note.
          if (offline.used) {
            const { localModelMarker, offlineWorkNotice } = await loadModel();
            deps.stderr(
              `${localModelMarker} The agents of this run used the offline model. ${offlineWorkNotice}\n`,
            );
          }
        } catch (error) {
          await fail(deps, error, options.json === true);
        } finally {
          await engine?.close();
        }
      },
    );

  program
    .command('eval <dir>')
    .description('run the evaluation suites of evaluations.yaml and report regressions against the last run')
    .option('--suite <name...>', 'only these suites')
    .option('--json', 'print the report as JSON')
    .option('--quiet', 'no progress display')
    .addOption(urlOption("run them on a running agentd gateway (<dir> is then the server's path)"))
    .addOption(tokenOption())
    .action(
      async (dir: string, options: RemoteOptions & { suite?: string[]; json?: boolean; quiet?: boolean }) => {
        let engine: WorkflowEngine | undefined;
        try {
          const suites = options.suite ? { suites: options.suite } : {};
          let report: EvaluationReport;
          if (options.url) {
            const client = await connectFromOptions(options);
            try {
              // The cases' node progress from the server's events: as with `run --url`, the first run that
              // starts after the request names the workflow, whose runs are shown until the report comes.
              let workflowId: string | undefined;
              const display = progressFor(deps);
              if (!options.quiet && !options.json)
                client.onEvent((event, payload) => {
                  if (!event.startsWith('workflow.') || typeof payload?.workflowId !== 'string') return;
                  if (workflowId === undefined && event === 'workflow.task-started')
                    workflowId = payload.workflowId;
                  if (payload.workflowId !== workflowId) return;
                  showProgress(display, { ...payload, stageId: payload.nodeId } as TelemetryEvent);
                });
              ({ report } = await client.call<{ report: EvaluationReport }>(
                'workflow.eval',
                { dir, ...suites },
                { timeoutMs: remoteRunTimeoutMs },
              ));
            } finally {
              await client.close();
            }
          } else {
            engine = await openEngine(deps, dir);
            // The node progress of each case's run, as `run` shows it (stderr, so --json stays clean).
            if (!options.quiet && !options.json) {
              const display = progressFor(deps);
              engine.subscribe((event) => showProgress(display, event));
            }
            report = await engine.runEvaluations(suites);
          }
          if (options.json) deps.stdout(`${JSON.stringify(report, null, 2)}\n`);
          else {
            const { color } = terminalOf(deps);
            for (const suite of report.suites) {
              deps.stdout(`suite ${suite.name}: ${suite.passed} passed, ${suite.failed} failed\n`);
              for (const result of suite.cases) {
                deps.stdout(
                  `  ${paintState(color, result.pass ? 'PASS' : 'FAIL')} ${result.caseId} (${paintState(color, result.status)}, ${result.durationMs} ms)\n`,
                );
                for (const assertion of result.assertions.filter((entry) => !entry.pass))
                  deps.stdout(`       ${assertion.type}: ${assertion.message}\n`);
              }
            }
            deps.stdout(`total: ${report.totals.passed}/${report.totals.cases} passed\n`);
            if (report.regressions.length > 0)
              deps.stdout(
                `regressions: ${report.regressions.map((entry) => `${entry.suite}/${entry.caseId}`).join(', ')}\n`,
              );
            if (report.fixed.length > 0)
              deps.stdout(
                `fixed: ${report.fixed.map((entry) => `${entry.suite}/${entry.caseId}`).join(', ')}\n`,
              );
          }
          if (report.totals.failed > 0) deps.setExitCode(ExitCodes.failure);
        } catch (error) {
          await fail(deps, error, options.json === true);
        } finally {
          await engine?.close();
        }
      },
    );

  program
    .command('inspect <taskId>')
    .description('show a workflow task: stage history, routing, lineage, events, artifacts')
    .option('--json', 'print the full inspection report as JSON')
    .addOption(urlOption("ask a running agentd gateway (its workflows' runs) instead of the database"))
    .addOption(tokenOption())
    .action(async (taskId: string, options: RemoteOptions & { json?: boolean }) => {
      try {
        const { concludeInterruptedRuns, createSqlRecordStore, inspectPersistedRun } =
          await loadWorkflowEngine();
        let report: InspectionReport | undefined;
        const location = options.url ? undefined : await deps.storeLocation();
        if (!location) {
          const client = await connectFromOptions(options);
          try {
            report = (await client.call<{ report: InspectionReport }>('workflow.inspect', { taskId })).report;
          } finally {
            await client.close();
          }
        } else {
          const store = await openStore(location);
          try {
            // A run whose process died reads `in_progress` until a process that runs workflows sweeps: this
            // read sweeps first, so it shows such a run as it is (failed, INTERRUPTED).
            await concludeInterruptedRuns(store.db, { now: Date.now() }).catch((error: unknown) =>
              deps.stderr(
                `agentd: could not conclude the workflow runs whose process stopped: ${error instanceof Error ? error.message : String(error)}\n`,
              ),
            );
            report = await inspectPersistedRun(createSqlRecordStore(store.db), taskId);
          } finally {
            await store.close();
          }
        }
        for (const path of report || !location ? [] : workflowDatabases(location.stateDir)) {
          const db: SqlDatabase = (await loadStore()).createSqliteDatabase({ path });
          try {
            report = await inspectPersistedRun(createSqlRecordStore(db), taskId);
          } finally {
            await db.close();
          }
          if (report) break;
        }
        if (!report)
          throw new UserInputError({
            code: ErrorCodes.notFound,
            message: `no workflow task ${taskId} ${location ? `in the store of ${location.stateDir}` : `at ${options.url}`}`,
          });
        if (options.json) deps.stdout(`${JSON.stringify(report, null, 2)}\n`);
        else printReport(deps, report);
      } catch (error) {
        await fail(deps, error, options.json === true);
      }
    });

  program
    .command('repl <dir>')
    .description(
      'interactive session over a workflow: requests, /attach, /history, /retry, /edit-last, /queue …',
    )
    .option('--profile <id>', 'CLI profile from cli_profiles.yaml')
    .action(async (dir: string, options: { profile?: string }) => {
      let engine: Awaited<ReturnType<typeof openEngine>> | undefined;
      try {
        engine = await openEngine(deps, dir);
        const { runWorkflowRepl } = await loadWorkflowEngine();
        await runWorkflowRepl({
          engine,
          io: { input: deps.stdin ?? process.stdin, write: deps.stdout },
          stateDir: engine.workflowDir,
          workDir: cwd(),
          prompt: '> ',
          ...(options.profile ? { profileId: options.profile } : {}),
        });
      } catch (error) {
        await fail(deps, error, false);
      } finally {
        await engine?.close();
      }
    });
}
