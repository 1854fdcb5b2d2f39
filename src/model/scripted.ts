import { deepFreeze, sleep } from '../util/index.js';
import { abortedError } from './provider-errors.js';
import type {
  LanguageModel,
  ModelRequest,
  ModelStopReason,
  ModelStreamError,
  ModelStreamEvent,
  ModelToolCall,
  ModelUsage,
} from './spec.js';

/** The error code of the stream a call gets when the script has no steps left. */
export const unexpectedModelCallCode = 'UNEXPECTED_MODEL_CALL';

/** One scripted reply. Fields combine in this order: text, tool calls, then usage and finish — or an error. */
export interface ScriptedReply {
  /** A string is sent as one delta; an array as one delta per element. */
  text?: string | string[];
  /** Tool calls; a missing id becomes `call_<call number>_<index>`. */
  toolCalls?: Array<Omit<ModelToolCall, 'id'> & { id?: string }>;
  /** End with this error (after any text) instead of finishing. `retryable` defaults to false. */
  error?: Partial<ModelStreamError> & { code: string };
  /** Default `{ inputTokens: 0, outputTokens: 0 }`; `null` sends no usage event. */
  usage?: ModelUsage | null;
  /** Default `tool_calls` when there are tool calls, else `end_turn`. */
  stopReason?: ModelStopReason;
  /** Wait this long before the first event; an abort during the wait ends the stream with ABORTED. */
  delayMs?: number;
  /** Never answer: wait until the call is aborted (to test timeouts and cancellation above the model). */
  hang?: boolean;
  /** Exact events to send, overriding every other field. */
  events?: ModelStreamEvent[];
}

/** A step computes its reply from the request (the request is already recorded when it runs). */
export type ScriptedResponder = (request: ModelRequest, callIndex: number) => ScriptedReply;
export type ScriptedStep = ScriptedReply | ScriptedResponder;

/** A model call that the script did not expect. Recorded on the model and reported by assertAllConsumed. */
export class UnexpectedModelCallError extends Error {
  readonly callIndex: number;
  readonly request: ModelRequest;
  constructor(callIndex: number, request: ModelRequest) {
    const last = request.messages[request.messages.length - 1];
    super(
      `Unexpected model call #${callIndex + 1}: the script has no steps left. Last message: ${
        last ? `${last.role}: ${last.content.slice(0, 120)}` : '(none)'
      }`,
    );
    this.name = 'UnexpectedModelCallError';
    this.callIndex = callIndex;
    this.request = request;
  }
}

export interface ScriptedModel extends LanguageModel {
  /** Every request received, deep-frozen copies, in call order. */
  readonly requests: readonly ModelRequest[];
  readonly unexpectedCalls: readonly UnexpectedModelCallError[];
  /** Adds steps to the end of the script. */
  push(...steps: ScriptedStep[]): void;
  remainingSteps(): number;
  /** Throws when steps are left over or an unexpected call happened. Call it in `afterEach`. */
  assertAllConsumed(): void;
}

export interface ScriptedModelOptions {
  steps?: ScriptedStep[];
  modelId?: string;
  provider?: string;
  contextWindowTokens?: number;
}

/**
 * A strict test double: each call consumes the next step. A call with no step left gets an error stream
 * (code UNEXPECTED_MODEL_CALL) and is recorded, so a test fails even when the code under test swallows
 * the error.
 */
export function createScriptedModel(options: ScriptedModelOptions = {}): ScriptedModel {
  const steps: ScriptedStep[] = [...(options.steps ?? [])];
  const requests: ModelRequest[] = [];
  const unexpectedCalls: UnexpectedModelCallError[] = [];

  async function* run(
    request: ModelRequest,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<ModelStreamEvent> {
    const callIndex = requests.length;
    const recorded = deepFreeze(structuredClone(request));
    requests.push(recorded);
    const step = steps.shift();
    if (step === undefined) {
      const error = new UnexpectedModelCallError(callIndex, recorded);
      unexpectedCalls.push(error);
      yield {
        type: 'error',
        error: { code: unexpectedModelCallCode, message: error.message, retryable: false },
      };
      return;
    }
    const reply = typeof step === 'function' ? step(recorded, callIndex) : step;
    if (reply.hang || reply.delayMs) {
      try {
        if (reply.hang) await waitForAbort(signal);
        else await sleep(reply.delayMs ?? 0, signal);
      } catch {
        yield { type: 'error', error: abortedError() };
        return;
      }
    }
    if (reply.events) {
      yield* reply.events;
      return;
    }
    const texts = typeof reply.text === 'string' ? [reply.text] : (reply.text ?? []);
    for (const text of texts) yield { type: 'text-delta', text };
    const toolCalls = reply.toolCalls ?? [];
    for (const [index, call] of toolCalls.entries()) {
      yield { type: 'tool-call', toolCall: { ...call, id: call.id ?? `call_${callIndex + 1}_${index}` } };
    }
    if (reply.error) {
      yield {
        type: 'error',
        error: { message: `scripted error ${reply.error.code}`, retryable: false, ...reply.error },
      };
      return;
    }
    if (reply.usage !== null)
      yield { type: 'usage', usage: reply.usage ?? { inputTokens: 0, outputTokens: 0 } };
    yield { type: 'finish', stopReason: reply.stopReason ?? (toolCalls.length ? 'tool_calls' : 'end_turn') };
  }

  return {
    specificationVersion: 'v1',
    provider: options.provider ?? 'scripted',
    modelId: options.modelId ?? 'scripted',
    contextWindowTokens: options.contextWindowTokens ?? 128_000,
    requests,
    unexpectedCalls,
    doStream: (request, callOptions) => run(request, callOptions.signal),
    push: (...more) => {
      steps.push(...more);
    },
    remainingSteps: () => steps.length,
    assertAllConsumed: () => {
      const problems: string[] = unexpectedCalls.map((error) => error.message);
      if (steps.length) {
        problems.push(
          `${steps.length} scripted step(s) were never used: ${steps.map((step) => describeStep(step)).join(', ')}`,
        );
      }
      if (problems.length) throw new Error(problems.join('\n'));
    },
  };
}

function describeStep(step: ScriptedStep): string {
  if (typeof step === 'function') return 'responder()';
  if (step.error) return `error(${step.error.code})`;
  if (step.toolCalls?.length) return `toolCalls(${step.toolCalls.map((call) => call.name).join('+')})`;
  if (step.text !== undefined) {
    const text = Array.isArray(step.text) ? step.text.join('') : step.text;
    return `text(${JSON.stringify(text.slice(0, 40))})`;
  }
  return step.hang ? 'hang' : 'reply';
}

function waitForAbort(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (!signal) return; // Nothing can end it: the caller's timeout must.
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
