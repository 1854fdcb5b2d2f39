import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { decodeJson } from '../util/index.js';
import type { WorkflowEngine, WorkflowRunResult } from './engine/index.js';
import { locateWorkflowModule } from './loader.js';
import type { CliProfile } from './manifest-schemas.js';
import type { TelemetryEvent } from './telemetry.js';

export interface ReplIo {
  input: NodeJS.ReadableStream;
  write(text: string): void;
}

export interface ReplOptions {
  engine: WorkflowEngine;
  io: ReplIo;
  /** A profile id from cli_profiles.yaml; the first profile when omitted. */
  profileId?: string;
  /** Where the persisted history file lives (relative `history_file`s resolve here). */
  stateDir?: string;
  /** Base of relative `/attach` paths. Default `process.cwd()`. */
  workDir?: string;
  prompt?: string;
}

const historyEntrySchema = z.object({
  at: z.number(),
  request: z.string(),
  files: z.array(z.string()),
  taskId: z.string(),
  status: z.string(),
  output: z.unknown(),
});
type HistoryEntry = z.output<typeof historyEntrySchema>;

export interface ReplSession {
  profile: CliProfile;
  history: HistoryEntry[];
  attachments: string[];
  print(text: string): void;
  engine: WorkflowEngine;
}

type CustomCommand = (args: string, session: ReplSession) => unknown;

const defaultProfile: CliProfile = {
  id: 'default',
  session_policies: { persist_history: false, history_file: 'repl_history.jsonl', max_history_items: 200 },
  input_mappings: {},
  telemetry_overlays: { enabled: true, level: 'summary', filters: [] },
  custom_commands: [],
};

const builtinHelp: Array<[string, string]> = [
  ['/help', 'list commands'],
  ['/quit', 'leave the REPL (also /exit)'],
  ['/attach <path>', 'attach a file to the next requests'],
  ['/detach', 'drop all attachments'],
  ['/history [n]', 'show the last n requests of this session (default 10)'],
  ['/retry', 'run the last request again'],
  ['/edit-last <text>', 'replace the last request with <text> and run it'],
  ['/profile [id]', 'show or switch the CLI profile'],
  ['/status [taskId]', 'status of a task (default: the last one)'],
  ['/inspect [taskId]', 'history and routing of a task (default: the last one)'],
  ['/queue <request>', 'queue a request without running it'],
  ['/run-queue', 'run everything queued, in FIFO order'],
  ['/queue-status', 'show queued and running tasks'],
];

/**
 * A reusable REPL over one workflow engine: a plain line is a request; `/commands` manage
 * attachments, history (persisted per profile), retries, edits and the task queue. Reads lines from
 * `io.input` until it ends or `/quit`.
 */
export async function runWorkflowRepl(options: ReplOptions): Promise<void> {
  const { engine, io } = options;
  const profiles = engine.workflow.manifests.cliProfiles.profiles;
  let profile =
    (options.profileId ? profiles.find((candidate) => candidate.id === options.profileId) : profiles[0]) ??
    defaultProfile;
  if (options.profileId && profile.id !== options.profileId) {
    io.write(`No profile "${options.profileId}" in cli_profiles.yaml; using "${profile.id}".\n`);
  }
  const workDir = options.workDir ?? process.cwd();
  const print = (text: string) => io.write(`${text}\n`);

  const historyPath = () => {
    const file = profile.session_policies.history_file;
    if (isAbsolute(file)) return file;
    return options.stateDir ? join(options.stateDir, file) : undefined;
  };
  const loadHistory = (): HistoryEntry[] => {
    const path = historyPath();
    if (!profile.session_policies.persist_history || !path || !existsSync(path)) return [];
    const entries: HistoryEntry[] = [];
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        entries.push(decodeJson(line, historyEntrySchema, { what: 'a REPL history line' }));
      } catch {
        // A torn line is skipped; the rest of the history stays usable.
      }
    }
    return entries.slice(-profile.session_policies.max_history_items);
  };
  const session: ReplSession = { profile, history: loadHistory(), attachments: [], print, engine };
  const saveEntry = (entry: HistoryEntry) => {
    session.history.push(entry);
    const max = profile.session_policies.max_history_items;
    const path = historyPath();
    if (session.history.length > max) session.history.splice(0, session.history.length - max);
    if (!profile.session_policies.persist_history || !path) return;
    mkdirSync(dirname(path), { recursive: true });
    if (session.history.length === max)
      writeFileSync(path, session.history.map((item) => `${JSON.stringify(item)}\n`).join(''));
    else appendFileSync(path, `${JSON.stringify(entry)}\n`);
  };

  const overlay = (event: TelemetryEvent) => {
    const settings = profile.telemetry_overlays;
    if (!settings.enabled) return;
    const wanted =
      settings.filters.length > 0
        ? settings.filters.includes(event.type)
        : settings.level === 'verbose' || event.type === 'node_completed' || event.type === 'node_failed';
    if (!wanted) return;
    const detail =
      event.type === 'node_failed'
        ? ` ${String((event.payload.error as { message?: string } | undefined)?.message ?? '')}`
        : event.payload.durationMs !== undefined
          ? ` (${String(event.payload.durationMs)} ms)`
          : '';
    print(`  · ${event.type} ${event.stageId ?? ''}${detail}`.trimEnd());
  };
  const unsubscribe = engine.subscribe(overlay);

  const buildInput = (request: string, files: string[]) => ({
    ...profile.input_mappings,
    request,
    ...(files.length > 0 ? { files } : {}),
  });
  const report = (result: WorkflowRunResult) => {
    print(
      `[${result.status}] task ${result.taskId}${result.error ? ` — ${result.error.code}: ${result.error.message}` : ''}`,
    );
    print(typeof result.output === 'string' ? result.output : JSON.stringify(result.output, null, 2));
    if (result.recordsNotWritten)
      print(`! ${result.recordsNotWritten.message} (${result.recordsNotWritten.code})`);
  };
  const runRequest = async (request: string, files: string[]) => {
    // A direct request also starts what /queue held, in FIFO order ahead of it.
    const queued = engine.enqueue(buildInput(request, files), { spec: { files } });
    await engine.runQueued();
    const result = await queued.result;
    saveEntry({
      at: result.completedAt,
      request,
      files,
      taskId: result.taskId,
      status: result.status,
      output: result.output,
    });
    report(result);
  };
  const pendingQueue: Array<{
    taskId: string;
    request: string;
    files: string[];
    result: Promise<WorkflowRunResult>;
  }> = [];
  const customCommands = new Map<string, { command: CliProfile['custom_commands'][number] }>();
  const indexCustom = () => {
    customCommands.clear();
    for (const command of profile.custom_commands) {
      for (const name of [command.name, ...command.aliases]) customCommands.set(name, { command });
    }
  };
  indexCustom();
  const last = () => session.history.at(-1);

  const handle = async (line: string): Promise<boolean> => {
    const trimmed = line.trim();
    if (!trimmed) return true;
    if (!trimmed.startsWith('/')) {
      await runRequest(trimmed, session.attachments.slice());
      return true;
    }
    const space = trimmed.indexOf(' ');
    const name = (space < 0 ? trimmed.slice(1) : trimmed.slice(1, space)).toLowerCase();
    const args = space < 0 ? '' : trimmed.slice(space + 1).trim();
    switch (name) {
      case 'quit':
      case 'exit':
        return false;
      case 'help':
        for (const [usage, text] of builtinHelp) print(`${usage.padEnd(22)} ${text}`);
        for (const command of profile.custom_commands)
          print(`/${command.name.padEnd(21)} ${command.description ?? '(custom)'}`);
        return true;
      case 'attach': {
        if (!args) {
          print('usage: /attach <path>');
          return true;
        }
        const absolute = resolve(workDir, args);
        if (!existsSync(absolute)) print(`note: ${args} does not exist yet; the workflow may create it`);
        session.attachments.push(args);
        print(`attached ${args} (${session.attachments.length} attachment(s))`);
        return true;
      }
      case 'detach':
        session.attachments = [];
        print('attachments cleared');
        return true;
      case 'history': {
        const count = Number.parseInt(args || '10', 10) || 10;
        const entries = session.history.slice(-count);
        if (entries.length === 0) print('(no history)');
        entries.forEach((entry, index) => {
          print(
            `${session.history.length - entries.length + index + 1}. [${entry.status}] ${entry.request}${entry.files.length ? ` (files: ${entry.files.join(', ')})` : ''} → ${entry.taskId}`,
          );
        });
        return true;
      }
      case 'retry': {
        const previous = last();
        if (!previous) {
          print('nothing to retry');
          return true;
        }
        await runRequest(previous.request, previous.files);
        return true;
      }
      case 'edit-last': {
        const previous = last();
        if (!previous) {
          print('nothing to edit');
          return true;
        }
        if (!args) {
          print('usage: /edit-last <new request text>');
          return true;
        }
        // Attachments made since the last request apply to the edited one; otherwise it keeps its files.
        await runRequest(args, session.attachments.length > 0 ? session.attachments.slice() : previous.files);
        return true;
      }
      case 'profile': {
        if (!args) {
          print(
            `profile: ${profile.id}${profile.label ? ` (${profile.label})` : ''}; available: ${profiles.map((candidate) => candidate.id).join(', ') || '(none)'}`,
          );
          return true;
        }
        const next = profiles.find((candidate) => candidate.id === args);
        if (!next) {
          print(`no profile "${args}"`);
          return true;
        }
        profile = next;
        session.profile = next;
        session.history = loadHistory();
        indexCustom();
        print(`profile: ${profile.id}`);
        return true;
      }
      case 'status': {
        const taskId = args || last()?.taskId;
        const status = taskId ? engine.status(taskId) : undefined;
        print(status ? JSON.stringify(status, null, 2) : `no task ${taskId ?? '(none yet)'}`);
        return true;
      }
      case 'inspect': {
        const taskId = args || last()?.taskId;
        const report = taskId ? await engine.inspect(taskId) : undefined;
        if (!report) {
          print(`no task ${taskId ?? '(none yet)'}`);
          return true;
        }
        print(
          `task ${report.task.taskId}: ${report.summary.status ?? report.task.state}, path ${report.summary.path.join(' → ')}`,
        );
        for (const stage of report.history)
          print(
            `  ${stage.index}. ${stage.nodeId} [${stage.nodeStatus}]${stage.error ? ` ${stage.error.code}` : ''}`,
          );
        return true;
      }
      case 'queue': {
        if (!args) {
          print('usage: /queue <request>');
          return true;
        }
        engine.pauseQueue();
        try {
          const files = session.attachments.slice();
          const queued = engine.enqueue(buildInput(args, files), { spec: { files } });
          pendingQueue.push({ taskId: queued.taskId, request: args, files, result: queued.result });
          print(`queued ${queued.taskId} (${engine.queueStatus().queued} waiting)`);
        } catch (error) {
          print(`rejected: ${(error as Error).message}`);
        }
        return true;
      }
      case 'run-queue': {
        const batch = pendingQueue.splice(0);
        await engine.runQueued();
        for (const item of batch) {
          const result = await item.result;
          saveEntry({
            at: result.completedAt,
            request: item.request,
            files: item.files,
            taskId: result.taskId,
            status: result.status,
            output: result.output,
          });
          report(result);
        }
        if (batch.length === 0) print('queue is empty');
        return true;
      }
      case 'queue-status': {
        const status = engine.queueStatus();
        print(
          `queued ${status.queued}, running ${status.running}, max_concurrency ${status.maxConcurrency}, max_queue_size ${status.maxQueueSize ?? 'unbounded'}${status.paused ? ', held' : ''}`,
        );
        for (const task of status.tasks) print(`  ${task.taskId} ${task.state.toUpperCase()}`);
        return true;
      }
      default: {
        const custom = customCommands.get(name);
        if (!custom) {
          print(`unknown command /${name}; try /help`);
          return true;
        }
        try {
          const fn = await loadCommand(engine.workflow.dir, custom.command.entrypoint);
          const output = await fn(args, session);
          if (output !== undefined)
            print(typeof output === 'string' ? output : JSON.stringify(output, null, 2));
        } catch (error) {
          print(`/${name} failed: ${(error as Error).message}`);
        }
        return true;
      }
    }
  };

  const lines = createInterface({ input: io.input, terminal: false, crlfDelay: Number.POSITIVE_INFINITY });
  io.write(`agentd workflow REPL — ${engine.workflow.id} (profile ${profile.id}); /help for commands\n`);
  try {
    if (options.prompt) io.write(options.prompt);
    for await (const line of lines) {
      let keepGoing: boolean;
      try {
        keepGoing = await handle(line);
      } catch (error) {
        print(`error: ${(error as Error).message}`);
        keepGoing = true;
      }
      if (!keepGoing) break;
      if (options.prompt) io.write(options.prompt);
    }
  } finally {
    lines.close();
    unsubscribe();
  }
}

async function loadCommand(dir: string, entrypoint: string): Promise<CustomCommand> {
  const hash = entrypoint.lastIndexOf('#');
  const module = hash >= 0 ? entrypoint.slice(0, hash) : entrypoint;
  const name = hash >= 0 ? entrypoint.slice(hash + 1) : 'default';
  const located = locateWorkflowModule(dir, module);
  if ('problem' in located) throw new Error(located.problem);
  const namespace = (await import(pathToFileURL(located.path).href)) as Record<string, unknown>;
  const fn = namespace[name];
  if (typeof fn !== 'function') throw new Error(`${entrypoint} is not a function`);
  return fn as CustomCommand;
}
