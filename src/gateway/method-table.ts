import type { z } from 'zod';
import type { BusEvent, BusEventType } from '../bus/index.js';
import type { Logger } from '../util/index.js';
import { ErrorCodes, formatZodIssues, UserInputError } from '../util/index.js';
import { GatewayErrorCodes } from './error-codes.js';
import { missingScope } from './scopes.js';

/** A session change a method reports (see `SessionChange` in event-hub.ts). */
export interface SessionChangeNotice {
  sessionKey: string;
  agentId: string | undefined;
  reason: 'new' | 'reset' | 'create' | 'patch' | 'delete';
  sessionId?: string;
}

export type GatewayProtocol = 'openclaw' | 'spiderweb';

/** What a client said about itself (OpenClaw `connect.params.client`; synthesised for Spiderweb clients). */
export interface ClientInfo {
  id: string;
  version?: string;
  platform?: string;
  mode?: string;
  displayName?: string;
  instanceId?: string;
}

/** Everything a method handler may know about the caller. No protocol detail leaks in here. */
export interface MethodContext {
  connId: string;
  protocol: GatewayProtocol;
  scopes: ReadonlyArray<string>;
  clientInfo: ClientInfo;
  /** Sends an event to the calling connection only; the adapter translates it to its wire format. */
  sendEvent(event: string, payload: unknown): void;
  /** Subscribes the calling connection to a session's run events and session-scoped bus events. */
  watchSession(sessionKey: string): void;
  /** Turns the calling connection's `sessions.changed` subscription (every session) on or off. */
  subscribeSessions(on: boolean): void;
  /** Tells every session-index subscriber that a session changed outside a run. */
  sessionChanged(change: SessionChangeNotice): void;
  /** Aborted when the connection closes. */
  signal: AbortSignal;
  logger: Logger;
}

const asyncResultMarker = Symbol.for('agentd.gateway.async-result');

/**
 * A two-phase result: `accepted` is answered at once, `final` when the work ends. OpenClaw clients get two
 * `res` frames with the same id (the second after the run's events); Spiderweb clients get only the final one.
 */
export interface AsyncResult {
  readonly [asyncResultMarker]: true;
  readonly accepted: unknown;
  readonly final: Promise<unknown>;
}

export function acceptedThenFinal(accepted: unknown, final: Promise<unknown>): AsyncResult {
  // The adapter always awaits `final`; this branch only keeps a connection that closed early from
  // turning a later failure into an unhandled rejection.
  final.catch(() => undefined);
  return { [asyncResultMarker]: true, accepted, final };
}

export function isAsyncResult(value: unknown): value is AsyncResult {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[asyncResultMarker] === true
  );
}

export interface MethodDefinition<P = any> {
  /** Operator scopes the caller must hold (see scopes.ts for implications). Empty: any authenticated client. */
  scopes: ReadonlyArray<string>;
  params: z.ZodType<P>;
  handler(params: P, context: MethodContext): Promise<unknown> | AsyncResult | unknown;
}

/** How a bus event is forwarded to clients. */
export interface ForwardedEvent {
  busType: string;
  wireName: string;
  /** Scopes a client needs to receive it. */
  scopes: ReadonlyArray<string>;
  /**
   * `legacy`: the original Spiderweb server sent this message, every Spiderweb client gets it.
   * `additive`: only Spiderweb clients that declared the capability `events` or the wire name get it.
   */
  spiderweb: 'legacy' | 'additive';
  /** Builds the wire payload; defaults to the event data plus its routing scope and timestamp. */
  toPayload: (event: BusEvent) => Record<string, unknown>;
  /** Which events of `busType` clients get; all when absent. */
  include?: (event: BusEvent) => boolean;
}

export interface ForwardOptions<K extends BusEventType = BusEventType> {
  scopes?: ReadonlyArray<string>;
  spiderweb?: 'legacy' | 'additive';
  toPayload?: (event: BusEvent<K>) => Record<string, unknown>;
  include?: (event: BusEvent<K>) => boolean;
}

export interface MethodTable {
  register<P>(name: string, definition: MethodDefinition<P>): void;
  has(name: string): boolean;
  /** Registered method names, sorted. */
  list(): string[];
  /** Validates scopes and params, then runs the handler. Throws AgentdError for the caller's mistakes. */
  invoke(name: string, rawParams: unknown, context: MethodContext): Promise<unknown>;
  /** Event names the gateway may send, listed in `hello-ok.features.events`. */
  declareEvents(names: ReadonlyArray<string>): void;
  events(): string[];
  /** Forwards a bus event type to clients as `wireName` (OpenClaw event / Spiderweb message type). */
  forwardBusEvent<K extends BusEventType>(busType: K, wireName: string, options?: ForwardOptions<K>): void;
  forwardedEvents(): ReadonlyArray<ForwardedEvent>;
}

function defaultPayload(event: BusEvent): Record<string, unknown> {
  const data = (
    typeof event.data === 'object' && event.data !== null ? event.data : { value: event.data }
  ) as Record<string, unknown>;
  return {
    ...data,
    ...(event.sessionKey !== undefined ? { sessionKey: event.sessionKey } : {}),
    ...(event.agentId !== undefined ? { agentId: event.agentId } : {}),
    ...(event.runId !== undefined ? { runId: event.runId } : {}),
    ...(event.workItemId !== undefined ? { workItemId: event.workItemId } : {}),
    ts: event.at,
  };
}

export function createMethodTable(): MethodTable {
  const methods = new Map<string, MethodDefinition>();
  const events = new Set<string>();
  const forwarded: ForwardedEvent[] = [];

  return {
    register(name, definition) {
      if (methods.has(name)) throw new Error(`gateway method ${name} is already registered`);
      methods.set(name, definition as MethodDefinition);
    },
    has: (name) => methods.has(name),
    list: () => [...methods.keys()].sort(),
    async invoke(name, rawParams, context) {
      const definition = methods.get(name);
      if (!definition) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `unknown method: ${name}`,
          details: { code: ErrorCodes.unknownMethod, method: name },
        });
      }
      const missing = missingScope(definition.scopes, context.scopes);
      if (missing !== undefined) {
        throw new UserInputError({
          code: ErrorCodes.forbidden,
          message: `missing scope: ${missing}`,
          details: {
            code: GatewayErrorCodes.missingScope,
            missingScope: missing,
            requiredScopes: [...definition.scopes],
          },
        });
      }
      const parsed = definition.params.safeParse(rawParams ?? {});
      if (!parsed.success) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: `invalid ${name} params: ${formatZodIssues(parsed.error.issues)}`,
          details: {
            issues: parsed.error.issues.map((issue) => ({
              path: issue.path.map(String),
              message: issue.message,
            })),
          },
        });
      }
      return await definition.handler(parsed.data, context);
    },
    declareEvents(names) {
      for (const name of names) events.add(name);
    },
    events: () => [...events].sort(),
    forwardBusEvent(busType, wireName, options = {}) {
      if (forwarded.some((entry) => entry.busType === busType && entry.wireName === wireName)) {
        throw new Error(`bus event ${busType} is already forwarded as ${wireName}`);
      }
      forwarded.push({
        busType,
        wireName,
        scopes: options.scopes ?? ['operator.read'],
        spiderweb: options.spiderweb ?? 'additive',
        // The hub calls it only with events of `busType`.
        toPayload: (options.toPayload as ForwardedEvent['toPayload'] | undefined) ?? defaultPayload,
        ...(options.include ? { include: options.include as NonNullable<ForwardedEvent['include']> } : {}),
      });
      events.add(wireName);
    },
    forwardedEvents: () => forwarded,
  };
}
