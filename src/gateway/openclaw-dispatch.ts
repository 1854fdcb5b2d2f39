import { z } from 'zod';
import type { Logger } from '../util/index.js';
import { ErrorCodes, formatZodIssues } from '../util/index.js';
import { toWireError } from './connection.js';
import { GatewayErrorCodes } from './error-codes.js';
import { isAsyncResult, type MethodContext, type MethodTable } from './method-table.js';

export const requestFrame = z.looseObject({
  type: z.literal('req'),
  id: z.string().min(1).max(256),
  method: z.string().min(1).max(256),
  params: z.unknown().optional(),
});

/** Requests whose answer the client must have read before any event of the run they start. */
const runStartingMethods = new Set(['chat.send', 'agent']);

/** The longest held run events wait for the pong that follows their run's answer. */
export const heldEventsMaxWaitMs = 2_000;

/**
 * The most events one connection holds while a run's answer awaits its pong. Past it (or past the
 * connection's `maxBufferedBytes` of held payloads) the client is a slow consumer and is disconnected.
 */
export const maxHeldEvents = 10_000;

type WireError = ReturnType<typeof toWireError>;

export interface OpenClawDispatcherDeps {
  table: MethodTable;
  context: MethodContext;
  /** Writes one frame (the frames of one event-loop turn share a socket write). False when it could not be. */
  send(frame: Record<string, unknown>): boolean;
  /** Whether frames can still be written. */
  isOpen(): boolean;
  /** Sends a WebSocket ping carrying `token`; the peer's pong echoes it (see `onPong`). */
  ping(token: string): void;
  maxPendingRequests: number;
  /** The most payload bytes held for one connection: its `maxBufferedBytes`, since held events are queued output. */
  maxHeldBytes: number;
  /**
   * What is held passed `maxHeldEvents` or `maxHeldBytes`: disconnect the client as a slow consumer. The held
   * events are dropped, and what the connection would hold afterwards is dropped too.
   */
  overflow(reason: string): void;
  logger: Logger;
}

export interface OpenClawDispatcher {
  /** Handles one text frame of a connected client. */
  onFrame(text: string): void;
  /**
   * Sends run events (and what must follow them) now, or once no run's answer awaits its pong. `bytes` is
   * about the size of what `send` writes, counted against `maxHeldBytes` while it is held.
   */
  whenNotHolding(send: () => void, bytes?: number): void;
  /** A pong from the client, with its payload as text. */
  onPong(token: string): void;
  sendResult(id: string, payload: unknown): void;
  sendError(id: string, error: WireError): void;
  /** The connection closed: nothing is held any longer. */
  close(): void;
}

/**
 * The request side of a connected OpenClaw client: request frames become method-table calls, answered with
 * one `res` (two for two-phase results such as `agent`).
 *
 * Run events wait until the client has read the answer to the request that started the run. The OpenClaw
 * TUI notes a run as its own when `chat.send` answers; if it read run events in the same chunk as that
 * answer, before its handler ran, it stayed "busy" forever — and a loaded client reads late, so the events
 * of a fast run often shared the chunk. So every run-starting answer is followed by a ping, and run events
 * are held from the request until that pong comes back: by then the client has read the answer. It costs
 * one round trip before a run's first event; OpenClaw's own gateway takes longer to start a run.
 *
 * Only a successful answer is followed by a ping: a refused request started no run, so what was held while
 * it ran goes out right after its error. What is held is bounded like the connection's outbound queue (a
 * client that never sends the pong would otherwise make it grow for 2 s after every answer, and the
 * cumulative assistant text makes that quadratic): past `maxHeldEvents` events or `maxHeldBytes` bytes the
 * client is disconnected as a slow consumer.
 */
export function createOpenClawDispatcher(deps: OpenClawDispatcherDeps): OpenClawDispatcher {
  return new Dispatcher(deps);
}

/** A class: every connection has one, and its methods are then shared instead of made per connection. */
class Dispatcher implements OpenClawDispatcher {
  #pending = 0;
  #unconfirmedAnswers = 0;
  #heldEvents: Array<() => void> | undefined;
  #heldBytes = 0;
  /** What was held overflowed: the connection is closing, and nothing more is held or sent from the hold. */
  #overflowed = false;
  #awaitedPongs: Map<string, () => void> | undefined;
  /**
   * Counts this connection's answer pings, which the tokens only need to tell apart: a pong the client makes up
   * can only release its own connection's events early.
   */
  #answerPings = 0;

  constructor(private readonly deps: OpenClawDispatcherDeps) {}

  sendResult(id: string, payload: unknown): void {
    this.deps.send({ type: 'res', id, ok: true, payload });
  }

  sendError(id: string, error: WireError): void {
    this.deps.send({ type: 'res', id, ok: false, error });
  }

  whenNotHolding(send: () => void, bytes = 0): void {
    if (this.#unconfirmedAnswers === 0) {
      send();
      return;
    }
    if (this.#overflowed) return;
    this.#heldEvents ??= [];
    this.#heldEvents.push(send);
    this.#heldBytes += bytes;
    const { maxHeldBytes } = this.deps;
    if (this.#heldEvents.length <= maxHeldEvents && this.#heldBytes <= maxHeldBytes) return;
    const reason =
      this.#heldBytes > maxHeldBytes
        ? `slow consumer: more than ${maxHeldBytes} bytes held for an unanswered ping`
        : `slow consumer: more than ${maxHeldEvents} events held for an unanswered ping`;
    this.deps.logger.warn(
      { heldEvents: this.#heldEvents.length, heldBytes: this.#heldBytes, maxHeldEvents, maxHeldBytes },
      'gateway: slow consumer disconnected',
    );
    this.#overflowed = true;
    this.#heldEvents = undefined;
    this.#heldBytes = 0;
    this.deps.overflow(reason);
  }

  #confirmAnswer(): void {
    this.#unconfirmedAnswers--;
    if (this.#unconfirmedAnswers > 0 || !this.#heldEvents) return;
    this.#heldBytes = 0;
    for (const send of this.#heldEvents.splice(0)) send();
  }

  /** After a run's answer was sent: ping, and confirm it on the pong (or after a while, for a client that never answers). */
  #awaitAnswerRead(): void {
    if (!this.deps.isOpen()) {
      this.#confirmAnswer();
      return;
    }
    const token = `answer-${++this.#answerPings}`;
    this.#awaitedPongs ??= new Map();
    const awaited = this.#awaitedPongs;
    const settle = () => {
      if (!awaited.delete(token)) return;
      clearTimeout(timer);
      this.#confirmAnswer();
    };
    const timer = setTimeout(settle, heldEventsMaxWaitMs);
    timer.unref();
    awaited.set(token, settle);
    this.deps.ping(token);
  }

  async #runRequest(id: string, method: string, params: unknown): Promise<void> {
    const { table, context, logger } = this.deps;
    const startsRun = runStartingMethods.has(method);
    // Events are held from the request on: a run may publish its first ones before its answer is sent.
    if (startsRun) this.#unconfirmedAnswers++;
    let answered = !startsRun;
    // The ping follows the answer in the same write: frames are read in order, so its pong still says the
    // client has read the answer, and a turn takes one socket write fewer than with the ping sent from the
    // answer's write callback.
    const answerSent = () => {
      if (answered) return;
      answered = true;
      this.#awaitAnswerRead();
    };
    // A refused request started no run: nothing waits for the client to read its error.
    const refusalSent = () => {
      if (answered) return;
      answered = true;
      this.#confirmAnswer();
    };
    try {
      const result = await table.invoke(method, params, context);
      if (!isAsyncResult(result)) {
        this.sendResult(id, result);
        answerSent();
        return;
      }
      this.sendResult(id, result.accepted);
      answerSent();
      // The final answer follows the run's events, which may still be held.
      try {
        const final = await result.final;
        this.whenNotHolding(() => this.sendResult(id, final));
      } catch (error) {
        const wire = toWireError(error, logger);
        this.whenNotHolding(() => this.sendError(id, wire));
      }
    } catch (error) {
      this.sendError(id, toWireError(error, logger));
      refusalSent();
    }
  }

  onFrame(text: string): void {
    const { logger } = this.deps;
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      // OpenClaw answers nothing to a frame that is not JSON and keeps the connection; so does agentd.
      logger.debug({ bytes: text.length }, 'gateway: ignored a frame that is not JSON');
      return;
    }
    const parsed = requestFrame.safeParse(frame);
    if (!parsed.success) {
      const id = (frame as { id?: unknown } | null)?.id;
      if (typeof id === 'string' && id.length > 0 && id.length <= 256) {
        this.sendError(id, {
          code: ErrorCodes.invalidRequest,
          message: `invalid request frame: ${formatZodIssues(parsed.error.issues)}`,
          retryable: false,
        });
      } else {
        logger.debug({}, 'gateway: ignored a frame that is not a request');
      }
      return;
    }
    const { id, method, params } = parsed.data;
    if (method === 'connect') {
      this.sendError(id, { code: ErrorCodes.invalidRequest, message: 'already connected', retryable: false });
      return;
    }
    if (this.#pending >= this.deps.maxPendingRequests) {
      this.sendError(id, {
        code: GatewayErrorCodes.unavailable,
        message: `too many requests in flight on this connection (limit ${this.deps.maxPendingRequests})`,
        retryable: true,
      });
      return;
    }
    this.#pending++;
    this.#runRequest(id, method, params).finally(() => {
      this.#pending--;
    });
  }

  onPong(token: string): void {
    this.#awaitedPongs?.get(token)?.();
  }

  close(): void {
    if (this.#awaitedPongs) for (const settle of [...this.#awaitedPongs.values()]) settle();
  }
}
