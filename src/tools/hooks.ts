import { constants as fsConstants } from 'node:fs';
import { access, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ModelMessage } from '../model/index.js';
import { type Logger, parseUntrustedJson, silentLogger } from '../util/index.js';
import { childEnvironment, type IsolationChoice, spawnIsolated } from './child-process.js';

export const hookEvents = ['before_llm_call', 'before_tool_call', 'after_tool_call', 'on_error'] as const;
export type HookEvent = (typeof hookEvents)[number];

export type HookDecision =
  | { action: 'allow' }
  | { action: 'block'; reason: string }
  | { action: 'modify'; patch: Record<string, unknown> };

const decisionSchema = z.discriminatedUnion('action', [
  z.object({ action: z.literal('allow') }),
  z.object({ action: z.literal('block'), reason: z.string().min(1).max(4000) }),
  z.object({ action: z.literal('modify'), patch: z.record(z.string(), z.unknown()) }),
]);

/** Fields present in every hook payload. */
export interface HookPayloadBase {
  runId: string;
  agentId: string;
  sessionKey?: string;
  workItemId?: string;
}

export interface HookPayloads {
  /** A `modify` patch may replace `messages` for this one call (the run's own context is unchanged). */
  before_llm_call: HookPayloadBase & {
    turn: number;
    model: string;
    messages: ModelMessage[];
    toolNames: string[];
  };
  before_tool_call: HookPayloadBase & {
    toolCallId: string;
    toolName: string;
    arguments: Record<string, unknown>;
  };
  after_tool_call: HookPayloadBase & {
    toolCallId: string;
    toolName: string;
    arguments: Record<string, unknown>;
    result: { content: string; isError: boolean };
  };
  on_error: HookPayloadBase & {
    where: 'model' | 'tool' | 'hook';
    toolName?: string;
    error: { code: string; message: string };
  };
}

/**
 * Which payload fields a `modify` may replace, per event. Everything else in a patch is ignored, so a hook
 * cannot rewrite the run id or the tool name.
 */
const toolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()),
});
const modelMessageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: z.string() }),
  z.object({ role: z.literal('user'), content: z.string() }),
  z.object({
    role: z.literal('assistant'),
    content: z.string(),
    toolCalls: z.array(toolCallSchema).optional(),
  }),
  z.object({
    role: z.literal('tool'),
    toolCallId: z.string(),
    toolName: z.string(),
    content: z.string(),
    isError: z.boolean().optional(),
  }),
]);

const patchSchemas = {
  before_llm_call: z.object({ messages: z.array(modelMessageSchema).min(1).optional() }),
  before_tool_call: z.object({ arguments: z.record(z.string(), z.unknown()).optional() }),
  after_tool_call: z.object({
    result: z.object({ content: z.string().optional(), isError: z.boolean().optional() }).optional(),
  }),
  on_error: z.object({}),
} satisfies Record<HookEvent, z.ZodType>;

/** An in-process hook. Returning nothing means allow. */
export interface Hook {
  name: string;
  events: ReadonlyArray<HookEvent>;
  handle(
    event: HookEvent,
    payload: HookPayloads[HookEvent],
    options: { signal: AbortSignal },
  ): HookDecision | undefined | Promise<HookDecision | undefined>;
}

export type HookOutcome<E extends HookEvent> =
  | { action: 'allow'; payload: HookPayloads[E]; modifiedBy: string[] }
  | { action: 'block'; reason: string; hook: string };

export interface HookPipeline {
  /**
   * Runs every hook registered for `event` in order (in-process hooks first, then executables by file
   * name). Each sees the payload as patched by the ones before it; the first block wins and stops the rest.
   * `options.signal` is read only when a hook handles the event.
   */
  run<E extends HookEvent>(
    event: E,
    payload: HookPayloads[E],
    options?: { signal?: AbortSignal },
  ): Promise<HookOutcome<E>>;
  /** Names of the hooks that handle `event` (or all hooks), in the order they run. */
  list(event?: HookEvent): Promise<string[]>;
  /** Re-scans `hooksDir`; executables are otherwise discovered once, on first use. */
  reload(): Promise<void>;
}

export interface CreateHookPipelineOptions {
  hooks?: Hook[];
  /**
   * Where executable hooks live: executables named `<event>` or `<event>.<anything>`. It must be a
   * directory the agent's tools cannot write (the runtime uses `<state dir>/hooks`), or a model could
   * rewrite a hook and have it run.
   */
  hooksDir?: string;
  /** Working directory of executable hooks (the runtime passes the workspace); default `hooksDir`. */
  workingDir?: string;
  /** How executable hooks are started (see ChildIsolation and IsolationChoice); default `none`. */
  isolation?: IsolationChoice;
  /** What a hook that crashes, times out or answers garbage means: `open` = allow, `closed` = block. */
  failMode?: 'open' | 'closed';
  timeoutMs?: number;
  /** Largest accepted stdout of an executable hook. */
  maxOutputBytes?: number;
  /**
   * Extra environment for executable hooks. Of agentd's own environment only PATH, LANG and TZ are passed
   * (HOME is the working directory).
   */
  env?: Record<string, string>;
  logger?: Logger;
}

const executableNamePattern = new RegExp(`^(${hookEvents.join('|')})(\\..+)?$`);

interface ExecutableHook {
  name: string;
  file: string;
  event: HookEvent;
}

class HookFailure extends Error {}

export function createHookPipeline(options: CreateHookPipelineOptions = {}): HookPipeline {
  const inProcess = options.hooks ?? [];
  const failMode = options.failMode ?? 'closed';
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxOutputBytes = options.maxOutputBytes ?? 1024 * 1024;
  const logger = options.logger ?? silentLogger;
  let discovery: Promise<ExecutableHook[]> | undefined;
  /** What the current discovery found, once it has: an event no hook handles is then answered at once. */
  let discovered: ExecutableHook[] | undefined;

  const discover = async (): Promise<ExecutableHook[]> => {
    if (!options.hooksDir) return [];
    let names: string[];
    try {
      names = await readdir(options.hooksDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const found: ExecutableHook[] = [];
    for (const name of names.sort()) {
      const match = executableNamePattern.exec(name);
      if (!match) continue;
      const file = path.join(options.hooksDir, name);
      const info = await stat(file).catch(() => undefined);
      if (!info?.isFile()) continue;
      const runnable = await access(file, fsConstants.X_OK).then(
        () => true,
        () => false,
      );
      if (!runnable) {
        logger.warn({ file }, 'hook file is not executable and is ignored; chmod +x it to enable it');
        continue;
      }
      found.push({ name: `hooks/${name}`, file, event: match[1] as HookEvent });
    }
    return found;
  };

  const runExecutable = (hook: ExecutableHook, event: HookEvent, payload: unknown, signal: AbortSignal) =>
    new Promise<HookDecision>((resolve, reject) => {
      const cwd = options.workingDir ?? path.dirname(hook.file);
      const child = spawnIsolated(hook.file, [], {
        isolation: options.isolation ?? 'none',
        cwd,
        env: childEnvironment({
          home: cwd,
          extra: { AGENTD_HOOK_EVENT: event, ...options.env },
        }),
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const stdout: Buffer[] = [];
      let stdoutBytes = 0;
      let stderr = '';
      let settled = false;
      const finish = (error: Error | undefined, decision?: HookDecision) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (error) reject(error);
        else resolve(decision!);
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        finish(new HookFailure(`timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      const onAbort = () => {
        child.kill('SIGKILL');
        finish(new HookFailure('aborted'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      child.stdout!.on('data', (chunk: Buffer) => {
        stdoutBytes += chunk.length;
        if (stdoutBytes > maxOutputBytes) {
          child.kill('SIGKILL');
          finish(new HookFailure(`wrote more than ${maxOutputBytes} bytes to stdout`));
          return;
        }
        stdout.push(chunk);
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        if (stderr.length < 2000) stderr += chunk.toString('utf8');
      });
      child.on('error', (error) => finish(new HookFailure(`could not start: ${error.message}`)));
      child.on('close', (code, closeSignal) => {
        if (code !== 0) {
          const how = code === null ? `was killed by ${closeSignal}` : `exited with code ${code}`;
          finish(new HookFailure(`${how}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`));
          return;
        }
        const text = Buffer.concat(stdout).toString('utf8').trim();
        if (text === '') {
          finish(undefined, { action: 'allow' });
          return;
        }
        try {
          finish(
            undefined,
            parseUntrustedJson(text, decisionSchema, { maxBytes: maxOutputBytes, what: 'hook output' }),
          );
        } catch (error) {
          finish(new HookFailure((error as Error).message));
        }
      });
      // A hook that exits without reading stdin makes the write fail with EPIPE; its exit code decides.
      child.stdin!.on('error', () => {});
      child.stdin!.end(JSON.stringify({ event, ...(payload as object) }));
    });

  const startDiscovery = (): Promise<ExecutableHook[]> => {
    const started = discover();
    discovery = started;
    discovered = undefined;
    started.then(
      (found) => {
        if (discovery === started) discovered = found;
      },
      () => {},
    );
    return started;
  };
  const executablesFor = () => discovery ?? startDiscovery();

  const handlersOf = (event: HookEvent, executables: ReadonlyArray<ExecutableHook>) => {
    const handlers: Array<{
      name: string;
      call: (payload: unknown, signal: AbortSignal) => Promise<HookDecision | undefined>;
    }> = [];
    for (const hook of inProcess) {
      if (!hook.events.includes(event)) continue;
      handlers.push({
        name: hook.name,
        call: async (payload, signal) => {
          const decision = await hook.handle(event, payload as HookPayloads[HookEvent], { signal });
          if (decision === undefined) return undefined;
          const checked = decisionSchema.safeParse(decision);
          if (!checked.success) throw new HookFailure('returned an invalid decision');
          return checked.data;
        },
      });
    }
    for (const hook of executables) {
      if (hook.event === event)
        handlers.push({
          name: hook.name,
          call: (payload, signal) => runExecutable(hook, event, payload, signal),
        });
    }
    return handlers;
  };

  const runHandlers = async <E extends HookEvent>(
    event: E,
    payload: HookPayloads[E],
    runOptions: { signal?: AbortSignal },
    handlers: ReturnType<typeof handlersOf>,
  ): Promise<HookOutcome<E>> => {
    if (handlers.length === 0) return { action: 'allow', payload, modifiedBy: [] };
    // Read only now: a caller's signal may be made on first read (an engage run's own), and most events
    // have no hook.
    const signal = runOptions.signal ?? new AbortController().signal;
    let current = payload;
    const modifiedBy: string[] = [];
    for (const handler of handlers) {
      let decision: HookDecision | undefined;
      try {
        decision = await handler.call(current, signal);
      } catch (error) {
        const message =
          error instanceof HookFailure
            ? error.message
            : `threw: ${(error as Error)?.message ?? String(error)}`;
        logger.warn({ hook: handler.name, event, failMode, reason: message }, 'hook failed');
        if (failMode === 'closed' && event !== 'on_error') {
          return {
            action: 'block',
            reason: `hook ${handler.name} failed (${message}); fail-closed policy blocks the call`,
            hook: handler.name,
          };
        }
        continue;
      }
      if (!decision || decision.action === 'allow') continue;
      // on_error is a notification: nothing is left to block or modify.
      if (event === 'on_error') continue;
      if (decision.action === 'block')
        return { action: 'block', reason: decision.reason, hook: handler.name };
      const patch = patchSchemas[event].safeParse(decision.patch);
      if (!patch.success) {
        logger.warn({ hook: handler.name, event }, 'hook patch has the wrong shape');
        if (failMode === 'closed') {
          return {
            action: 'block',
            reason: `hook ${handler.name} sent a malformed patch; fail-closed policy blocks the call`,
            hook: handler.name,
          };
        }
        continue;
      }
      current = mergePatch(event, current, patch.data as Record<string, unknown>);
      modifiedBy.push(handler.name);
    }
    return { action: 'allow', payload: current, modifiedBy };
  };

  return {
    run(event, payload, runOptions = {}) {
      // Once the folder is read, an event (most have no hook) is answered without waiting on the discovery.
      if (discovered !== undefined)
        return runHandlers(event, payload, runOptions, handlersOf(event, discovered));
      return executablesFor().then((found) =>
        runHandlers(event, payload, runOptions, handlersOf(event, found)),
      );
    },
    async list(event) {
      const names = inProcess
        .filter((hook) => event === undefined || hook.events.includes(event))
        .map((hook) => hook.name);
      for (const hook of await executablesFor())
        if (event === undefined || hook.event === event) names.push(hook.name);
      return names;
    },
    async reload() {
      await startDiscovery();
    },
  };
}

function mergePatch<E extends HookEvent>(
  event: E,
  payload: HookPayloads[E],
  patch: Record<string, unknown>,
): HookPayloads[E] {
  const defined = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
  if (event === 'after_tool_call' && defined.result) {
    const current = payload as HookPayloads['after_tool_call'];
    const resultPatch = Object.fromEntries(
      Object.entries(defined.result as object).filter(([, value]) => value !== undefined),
    );
    return { ...current, result: { ...current.result, ...resultPatch } } as HookPayloads[E];
  }
  return { ...payload, ...defined };
}
