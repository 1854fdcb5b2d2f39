import './events.js';
import type { z } from 'zod';
import type { ModelToolCall } from '../model/index.js';
import { AgentdError, ErrorCodes, formatZodIssues } from '../util/index.js';
import type { HookPipeline } from './hooks.js';
import type { Policy } from './policy.js';
import type { ToolRegistry } from './registry.js';
import type { ToolContext, ToolResultMetadata } from './tool.js';

/** How a call ended; `ok` and `error` ran the tool, the others did not (or were cut off). */
export type ToolCallStatus =
  | 'ok'
  | 'error'
  | 'unknown_tool'
  | 'invalid_arguments'
  | 'denied'
  | 'blocked'
  | 'aborted';

export interface ToolCallOutcome {
  toolCallId: string;
  toolName: string;
  /** Arguments as finally executed (after validation and any hook patch). */
  arguments: Record<string, unknown>;
  content: string;
  isError: boolean;
  status: ToolCallStatus;
  metadata?: ToolResultMetadata;
}

/** What an approver is asked about: one call the policy marks as ask-first. */
export interface ToolApprovalRequest {
  runId: string;
  agentId: string;
  sessionKey?: string;
  toolCallId: string;
  toolName: string;
  arguments: Record<string, unknown>;
  /** The asking rule's reason. */
  reason: string;
  signal: AbortSignal;
}

/** Decides ask-first calls, e.g. by asking the editor driving the session; `false` refuses the call. */
export type ToolApprover = (request: ToolApprovalRequest) => Promise<boolean>;

export interface ExecuteToolCallOptions {
  registry: ToolRegistry;
  /** Tools this run may use; every registered tool when omitted. */
  allowedNames?: ReadonlySet<string>;
  policy?: Policy;
  /** Asked about calls the policy marks `ask`; without one those calls are refused. */
  approve?: ToolApprover;
  hooks?: HookPipeline;
  context: ToolContext;
  /** Results longer than this are cut (with a note) before they reach the model. */
  maxResultChars?: number;
}

const defaultMaxResultChars = 50_000;

function truncate(content: string, maxChars: number): string {
  if (content.length <= maxChars) return content;
  return `${content.slice(0, maxChars)}\n[… truncated ${content.length - maxChars} of ${content.length} characters]`;
}

/**
 * Runs one model tool call through the whole pipeline: lookup → zod validation → `before_tool_call` hooks
 * (a patch is validated again) → policy on the final arguments → execute (raced against abort) →
 * `after_tool_call` hooks. Never throws: every failure becomes an `is_error` outcome the model can read.
 * The engage loop, child work and the sandbox all call tools through here, so hooks and policy cover all.
 */
export async function executeToolCall(
  call: ModelToolCall,
  options: ExecuteToolCallOptions,
): Promise<ToolCallOutcome> {
  const { context, hooks, policy, registry } = options;
  const maxResultChars = options.maxResultChars ?? defaultMaxResultChars;

  const tool =
    options.allowedNames && !options.allowedNames.has(call.name) ? undefined : registry.get(call.name);
  if (!tool) {
    const available = options.allowedNames
      ? [...options.allowedNames]
      : registry.list().map((entry) => entry.name);
    return failed(
      call,
      'unknown_tool',
      `Unknown tool "${call.name}". Available tools: ${available.join(', ') || '(none)'}.`,
      call.arguments,
      maxResultChars,
    );
  }
  if (context.signal.aborted)
    return failed(
      call,
      'aborted',
      'The run was aborted before this tool call started.',
      call.arguments,
      maxResultChars,
    );
  if (typeof call.arguments.__raw === 'string' && Object.keys(call.arguments).length === 1) {
    return failed(
      call,
      'invalid_arguments',
      `The arguments for ${call.name} were not valid JSON. Send a JSON object matching the tool's schema.`,
      call.arguments,
      maxResultChars,
    );
  }

  let parsed = tool.input.safeParse(call.arguments);
  if (!parsed.success)
    return failed(
      call,
      'invalid_arguments',
      invalidArguments(call, parsed.error),
      call.arguments,
      maxResultChars,
    );
  let args = call.arguments;

  if (hooks) {
    const scope = scopeOf(context);
    const base = { toolCallId: call.id, toolName: call.name };
    const outcome = await hooks.run(
      'before_tool_call',
      { ...scope, ...base, arguments: args },
      { signal: context.signal },
    );
    if (outcome.action === 'block') {
      context.bus.publish(
        'tool:hook-blocked',
        { runId: context.runId, ...base, hook: outcome.hook, reason: outcome.reason, phase: 'before' },
        scope,
      );
      return failed(
        call,
        'blocked',
        `Blocked by hook ${outcome.hook}: ${outcome.reason}`,
        call.arguments,
        maxResultChars,
      );
    }
    if (outcome.modifiedBy.length > 0) {
      args = outcome.payload.arguments;
      parsed = tool.input.safeParse(args);
      if (!parsed.success)
        return failed(
          call,
          'invalid_arguments',
          `${invalidArguments(call, parsed.error)} (after patch by ${outcome.modifiedBy.join(', ')})`,
          args,
          maxResultChars,
        );
    }
  }
  const input = parsed.data;

  if (policy) {
    const decision = policy.check({
      target: 'tool',
      targetId: call.name,
      agentId: context.agentId,
      resource: tool.policyResource?.(input, context),
    });
    if (!decision.allowed) {
      const reason = decision.reason ?? 'denied by policy';
      context.bus.publish(
        'tool:policy-denied',
        {
          runId: context.runId,
          agentId: context.agentId,
          toolCallId: call.id,
          toolName: call.name,
          reason,
          ...(decision.rule ? { rule: decision.rule } : {}),
        },
        scopeOf(context),
      );
      return failed(
        call,
        'denied',
        `Policy denied ${call.name}: ${reason}. The call was not run.`,
        args,
        maxResultChars,
      );
    }
    if (decision.ask) {
      const reason = decision.reason ?? 'asks first';
      let approved = false;
      try {
        approved = options.approve
          ? await options.approve({
              ...scopeOf(context),
              toolCallId: call.id,
              toolName: call.name,
              arguments: args,
              reason,
              signal: context.signal,
            })
          : false;
      } catch (error) {
        context.logger.warn({ err: error, toolName: call.name }, 'tool approval failed; refusing the call');
      }
      if (context.signal.aborted)
        return failed(
          call,
          'aborted',
          'The run was aborted while waiting for approval.',
          args,
          maxResultChars,
        );
      if (!approved) {
        const why = options.approve
          ? 'the user did not approve it'
          : 'it needs approval and nobody can be asked in this run';
        context.bus.publish(
          'tool:policy-denied',
          {
            runId: context.runId,
            agentId: context.agentId,
            toolCallId: call.id,
            toolName: call.name,
            reason: `${reason}; ${why}`,
            ...(decision.rule ? { rule: decision.rule } : {}),
          },
          scopeOf(context),
        );
        return failed(call, 'denied', `${call.name} was not run: ${why} (${reason}).`, args, maxResultChars);
      }
    }
  }

  let content: string;
  let isError: boolean;
  let status: ToolCallStatus;
  let metadata: ToolResultMetadata | undefined;
  try {
    const result = await raceAbort(tool.execute(input, context), context.signal);
    if (typeof result === 'string') {
      content = result;
      isError = false;
    } else {
      content = result.content;
      isError = result.isError ?? false;
      metadata = result.metadata;
    }
    status = isError ? 'error' : 'ok';
  } catch (error) {
    if (context.signal.aborted)
      return failed(
        call,
        'aborted',
        'The run was aborted while this tool was running.',
        args,
        maxResultChars,
      );
    const message = (error as Error)?.message ?? String(error);
    const code = AgentdError.isInstance(error) ? error.code : ErrorCodes.toolFailed;
    content = `${call.name} failed: ${AgentdError.isInstance(error) ? `${code}: ` : ''}${message}`;
    isError = true;
    status = 'error';
    if (hooks) {
      await hooks.run(
        'on_error',
        {
          ...scopeOf(context),
          where: 'tool',
          toolName: call.name,
          error: { code, message },
        },
        { signal: context.signal },
      );
    }
  }

  if (hooks) {
    const scope = scopeOf(context);
    const base = { toolCallId: call.id, toolName: call.name };
    const outcome = await hooks.run(
      'after_tool_call',
      { ...scope, ...base, arguments: args, result: { content, isError } },
      { signal: context.signal },
    );
    if (outcome.action === 'block') {
      context.bus.publish(
        'tool:hook-blocked',
        { runId: context.runId, ...base, hook: outcome.hook, reason: outcome.reason, phase: 'after' },
        scope,
      );
      // The tool did run; only its result is withheld, so runtime metadata (a ledger write) stays.
      return {
        ...base,
        arguments: args,
        content: `Result withheld by hook ${outcome.hook}: ${outcome.reason}`,
        isError: true,
        status: 'blocked',
        ...(metadata ? { metadata } : {}),
      };
    }
    content = outcome.payload.result.content;
    isError = outcome.payload.result.isError;
  }

  // A plain literal with `metadata` added after: spreading into a literal costs V8 a slow path per call.
  const outcome: ToolCallOutcome = {
    toolCallId: call.id,
    toolName: call.name,
    arguments: args,
    content: truncate(content, maxResultChars),
    isError,
    status: isError && status === 'ok' ? 'error' : status,
  };
  if (metadata) outcome.metadata = metadata;
  return outcome;
}

/** The bus scope of the run a call belongs to (for the events and hooks of the unusual paths). */
function scopeOf(context: ToolContext): {
  runId: string;
  agentId: string;
  sessionKey?: string;
  workItemId?: string;
} {
  return {
    runId: context.runId,
    agentId: context.agentId,
    ...(context.sessionKey !== undefined ? { sessionKey: context.sessionKey } : {}),
    ...(context.workItemId !== undefined ? { workItemId: context.workItemId } : {}),
  };
}

function failed(
  call: ModelToolCall,
  status: ToolCallStatus,
  content: string,
  args: Record<string, unknown>,
  maxResultChars: number,
): ToolCallOutcome {
  return {
    toolCallId: call.id,
    toolName: call.name,
    arguments: args,
    content: truncate(content, maxResultChars),
    isError: true,
    status,
  };
}

function invalidArguments(call: ModelToolCall, error: z.ZodError): string {
  return `Invalid arguments for ${call.name}: ${formatZodIssues(error.issues)}`;
}

/**
 * The calls racing each signal. One `abort` listener per signal serves them all: adding and removing an
 * EventTarget listener per call costs more than the rest of a no-op tool call's pipeline.
 */
const racing = new WeakMap<AbortSignal, Set<(reason: unknown) => void>>();

function racersOf(signal: AbortSignal): Set<(reason: unknown) => void> {
  let racers = racing.get(signal);
  if (!racers) {
    const waiting = new Set<(reason: unknown) => void>();
    racers = waiting;
    racing.set(signal, waiting);
    signal.addEventListener(
      'abort',
      () => {
        for (const reject of waiting) reject(signal.reason);
        waiting.clear();
      },
      { once: true },
    );
  }
  return racers;
}

/** Resolves with the tool's result or rejects at abort, so a tool that ignores its signal cannot hang a run. */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    work.catch(() => {});
    return Promise.reject(signal.reason);
  }
  const racers = racersOf(signal);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (reason: unknown) => {
      work.catch(() => {});
      reject(reason);
    };
    racers.add(onAbort);
    work.then(
      (value) => {
        racers.delete(onAbort);
        resolve(value);
      },
      (error) => {
        racers.delete(onAbort);
        reject(error);
      },
    );
  });
}
