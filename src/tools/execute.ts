import './events.js';
import type { z } from 'zod';
import type { ModelToolCall } from '../model/index.js';
import { AgentdError, createSignalWatchers, ErrorCodes, formatZodIssues } from '../util/index.js';
import type { HookPipeline } from './hooks.js';
import type { Policy } from './policy.js';
import type { ToolRegistry } from './registry.js';
import type { ToolContext, ToolDefinition, ToolResult, ToolResultMetadata } from './tool.js';

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
  /**
   * What aborts the call: checked before the tool starts and raced while it runs. `context.signal` when
   * omitted; `null` for a call nothing can abort (the engage loop's run without a caller signal), which is
   * then neither checked nor raced, so `context.signal` is never read on the tool's behalf.
   */
  abortSignal?: AbortSignal | null;
  /** Results longer than this are cut (with a note) before they reach the model. */
  maxResultChars?: number;
}

const defaultMaxResultChars = 50_000;

function truncate(content: string, maxChars: number): string {
  if (content.length <= maxChars) return content;
  return `${content.slice(0, maxChars)}\n[… truncated ${content.length - maxChars} of ${content.length} characters]`;
}

/**
 * Takes the end of a call started with `executeToolCallTo`: exactly one of its methods is called, once,
 * with the call's `slot`. Neither may throw: they are called from reactions of the tool's promise.
 */
export interface ToolOutcomeSink {
  onOutcome(outcome: ToolCallOutcome, slot: number): void;
  /** The pipeline itself threw (a schema, hook pipeline or policy that throws): `executeToolCall` rejects. */
  onFailure(error: unknown, slot: number): void;
}

/**
 * Runs one model tool call through the whole pipeline: lookup → zod validation → `before_tool_call` hooks
 * (a patch is validated again) → policy on the final arguments → execute (raced against abort) →
 * `after_tool_call` hooks. Never throws: every failure becomes an `is_error` outcome the model can read.
 * The engage loop, child work and the sandbox all call tools through here, so hooks and policy cover all.
 */
export function executeToolCall(
  call: ModelToolCall,
  options: ExecuteToolCallOptions,
): Promise<ToolCallOutcome> {
  return new Promise((resolve, reject) =>
    executeToolCallTo(call, options, { onOutcome: resolve, onFailure: reject }, 0),
  );
}

/**
 * `executeToolCall` for a caller that takes the outcome as it comes: `sink.onOutcome(outcome, slot)` is
 * called once, never synchronously (as a promise's reaction would be). A call with neither hooks nor
 * policy costs one reaction on the tool's promise this way, where a promise per layer (pipeline, caller,
 * `Promise.all`) cost four more and their closures (the engage loop runs each turn's calls this way).
 */
export function executeToolCallTo(
  call: ModelToolCall,
  options: ExecuteToolCallOptions,
  sink: ToolOutcomeSink,
  slot: number,
): void {
  try {
    startCall(call, options, sink, slot);
  } catch (error) {
    Promise.reject(error).catch((reason) => sink.onFailure(reason, slot));
  }
}

function startCall(
  call: ModelToolCall,
  options: ExecuteToolCallOptions,
  sink: ToolOutcomeSink,
  slot: number,
): void {
  const { context, registry } = options;
  const maxResultChars = options.maxResultChars ?? defaultMaxResultChars;
  const abortSignal = abortSignalOf(options);

  const tool =
    options.allowedNames && !options.allowedNames.has(call.name) ? undefined : registry.get(call.name);
  if (!tool) {
    const available = options.allowedNames
      ? [...options.allowedNames]
      : registry.list().map((entry) => entry.name);
    deliverLater(
      sink,
      slot,
      failed(
        call,
        'unknown_tool',
        `Unknown tool "${call.name}". Available tools: ${available.join(', ') || '(none)'}.`,
        call.arguments,
        maxResultChars,
      ),
    );
    return;
  }
  if (abortSignal?.aborted) {
    deliverLater(
      sink,
      slot,
      failed(
        call,
        'aborted',
        'The run was aborted before this tool call started.',
        call.arguments,
        maxResultChars,
      ),
    );
    return;
  }
  if (typeof call.arguments.__raw === 'string' && Object.keys(call.arguments).length === 1) {
    deliverLater(
      sink,
      slot,
      failed(
        call,
        'invalid_arguments',
        `The arguments for ${call.name} were not valid JSON. Send a JSON object matching the tool's schema.`,
        call.arguments,
        maxResultChars,
      ),
    );
    return;
  }

  const parsed = tool.input.safeParse(call.arguments);
  if (!parsed.success) {
    deliverLater(
      sink,
      slot,
      failed(call, 'invalid_arguments', invalidArguments(call, parsed.error), call.arguments, maxResultChars),
    );
    return;
  }
  // Without hooks or policy nothing is awaited before or after the tool: no async frame around it, whose
  // promises (and, with an AsyncLocalStorage in the process, their hooks) every call would pay for.
  if (!options.hooks && !options.policy) {
    new DirectCall(call, tool, parsed.data, context, abortSignal, maxResultChars, sink, slot);
    return;
  }
  executeGuarded(call, options, tool, parsed.data, maxResultChars).then(
    (outcome) => sink.onOutcome(outcome, slot),
    (error) => sink.onFailure(error, slot),
  );
}

function abortSignalOf(options: ExecuteToolCallOptions): AbortSignal | null {
  return options.abortSignal === undefined ? options.context.signal : options.abortSignal;
}

/** An outcome decided before any tool ran, delivered a reaction later like every other outcome. */
function deliverLater(sink: ToolOutcomeSink, slot: number, outcome: ToolCallOutcome): void {
  Promise.resolve(outcome).then((ready) => sink.onOutcome(ready, slot));
}

/**
 * A call with neither hooks nor policy: the tool runs at once, raced against the run's abort, and its
 * outcome goes straight to the sink. One object per call holds what the race needs; its two reactions on
 * the tool's promise are the only closures.
 */
class DirectCall implements Racer {
  private settled = false;

  constructor(
    private readonly call: ModelToolCall,
    private readonly tool: ToolDefinition,
    input: unknown,
    context: ToolContext,
    private readonly signal: AbortSignal | null,
    private readonly maxResultChars: number,
    private readonly sink: ToolOutcomeSink,
    private readonly slot: number,
  ) {
    const work = startTool(tool, input, context);
    if (signal?.aborted) {
      work.catch(ignore);
      deliverLater(sink, slot, this.abortedOutcome());
      this.settled = true;
      return;
    }
    if (signal) racing.add(signal, this);
    work.then(
      (result) => this.succeeded(result),
      (error) => this.threw(error),
    );
  }

  private succeeded(result: ToolResult | string): void {
    if (this.settled) return;
    this.end();
    const { call } = this;
    const run = runOf(result);
    this.sink.onOutcome(
      outcomeOf(
        call,
        call.arguments,
        run.content,
        run.isError,
        run.status,
        run.metadata,
        this.maxResultChars,
      ),
      this.slot,
    );
  }

  private threw(error: unknown): void {
    if (this.settled) return;
    this.end();
    if (this.signal?.aborted) {
      this.sink.onOutcome(this.abortedOutcome(), this.slot);
      return;
    }
    const run = thrownRun(this.tool, error);
    const { call } = this;
    this.sink.onOutcome(
      outcomeOf(call, call.arguments, run.content, true, 'error', undefined, this.maxResultChars),
      this.slot,
    );
  }

  /** The run was aborted first; the tool's promise already has its reactions, so it cannot go unhandled. */
  abort(): void {
    if (this.settled) return;
    this.settled = true;
    this.sink.onOutcome(this.abortedOutcome(), this.slot);
  }

  private end(): void {
    this.settled = true;
    if (this.signal) racing.remove(this.signal, this);
  }

  private abortedOutcome(): ToolCallOutcome {
    const { call } = this;
    return failed(call, 'aborted', abortedRun().content, call.arguments, this.maxResultChars);
  }
}

/** The rest of the pipeline for a call that hooks or a policy may stop, patch or ask about. */
async function executeGuarded(
  call: ModelToolCall,
  options: ExecuteToolCallOptions,
  tool: ToolDefinition,
  validated: unknown,
  maxResultChars: number,
): Promise<ToolCallOutcome> {
  const { context, hooks, policy } = options;
  let input = validated;
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
      const patched = tool.input.safeParse(args);
      if (!patched.success)
        return failed(
          call,
          'invalid_arguments',
          `${invalidArguments(call, patched.error)} (after patch by ${outcome.modifiedBy.join(', ')})`,
          args,
          maxResultChars,
        );
      input = patched.data;
    }
  }

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
      if (abortSignalOf(options)?.aborted)
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

  const run = await runTool(tool, input, context, abortSignalOf(options));
  if (run.status === 'aborted') return failed(call, 'aborted', run.content, args, maxResultChars);
  let { content, isError } = run;
  if (hooks && run.failure) {
    await hooks.run(
      'on_error',
      {
        ...scopeOf(context),
        where: 'tool',
        toolName: call.name,
        error: run.failure,
      },
      { signal: context.signal },
    );
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
        ...(run.metadata ? { metadata: run.metadata } : {}),
      };
    }
    content = outcome.payload.result.content;
    isError = outcome.payload.result.isError;
  }
  return outcomeOf(call, args, content, isError, run.status, run.metadata, maxResultChars);
}

/** What running a tool produced, before `after_tool_call` hooks and truncation. */
interface ToolRun {
  content: string;
  isError: boolean;
  /** `aborted`: the run was aborted while the tool ran; `content` says so. */
  status: 'ok' | 'error' | 'aborted';
  metadata: ToolResultMetadata | undefined;
  /** Set when the tool threw: what `on_error` hooks are told. */
  failure: { code: string; message: string } | undefined;
}

/** Calls the tool; a tool that throws instead of returning a promise gives a rejected one. */
function startTool(tool: ToolDefinition, input: unknown, context: ToolContext): Promise<ToolResult | string> {
  try {
    return tool.execute(input, context);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** What a tool returned, as a `ToolRun`. */
function runOf(result: ToolResult | string): ToolRun {
  return typeof result === 'string'
    ? { content: result, isError: false, status: 'ok', metadata: undefined, failure: undefined }
    : {
        content: result.content,
        isError: result.isError ?? false,
        status: result.isError ? 'error' : 'ok',
        metadata: result.metadata,
        failure: undefined,
      };
}

/**
 * Runs the tool, raced against the run's abort so a tool that ignores its signal cannot hang a run, and
 * turns whatever it returns or throws into a `ToolRun`. Never rejects. (The path with hooks or policy;
 * `DirectCall` is the same race for a call without them.)
 */
function runTool(
  tool: ToolDefinition,
  input: unknown,
  context: ToolContext,
  signal: AbortSignal | null,
): Promise<ToolRun> {
  const work = startTool(tool, input, context);
  if (!signal) return work.then(runOf, (error) => thrownRun(tool, error));
  if (signal.aborted) {
    work.catch(ignore);
    return Promise.resolve(abortedRun());
  }
  return new Promise<ToolRun>((resolve) => {
    // The tool's promise gets its reactions below, so an abort leaves no rejection unhandled.
    const racer: Racer = { abort: () => resolve(abortedRun()) };
    racing.add(signal, racer);
    work.then(
      (result) => {
        racing.remove(signal, racer);
        resolve(runOf(result));
      },
      (error) => {
        racing.remove(signal, racer);
        resolve(signal.aborted ? abortedRun() : thrownRun(tool, error));
      },
    );
  });
}

function abortedRun(): ToolRun {
  return {
    content: 'The run was aborted while this tool was running.',
    isError: true,
    status: 'aborted',
    metadata: undefined,
    failure: undefined,
  };
}

function thrownRun(tool: ToolDefinition, error: unknown): ToolRun {
  const message = (error as Error)?.message ?? String(error);
  const code = AgentdError.isInstance(error) ? error.code : ErrorCodes.toolFailed;
  return {
    content: `${tool.name} failed: ${AgentdError.isInstance(error) ? `${code}: ` : ''}${message}`,
    isError: true,
    status: 'error',
    metadata: undefined,
    failure: { code, message },
  };
}

/** The outcome of a call that ran: a plain literal with `metadata` added after (a spread is V8's slow path). */
function outcomeOf(
  call: ModelToolCall,
  args: Record<string, unknown>,
  content: string,
  isError: boolean,
  status: ToolRun['status'],
  metadata: ToolResultMetadata | undefined,
  maxResultChars: number,
): ToolCallOutcome {
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

/** A tool call racing its run's abort: `abort` ends the race with the abort when it comes first. */
interface Racer {
  abort(): void;
}

function ignore(): void {}

/**
 * The calls racing each signal: an abort ends each race with the abort when it comes first. A run's tools
 * race the run's own signal, which ends with the run: its one listener stays from the first call to the last.
 */
const racing = createSignalWatchers<Racer>((racer) => racer.abort(), { keepListenerWhenEmpty: true });
