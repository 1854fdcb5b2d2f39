import type { Clock, Logger } from '../util/index.js';
import { silentLogger, systemClock } from '../util/index.js';
import type { BusEvent, BusEventMap, BusEventScope, BusEventType } from './events.js';

/** Which events a subscriber receives: the scope fields narrow by session, agent, work item or run. */
export interface BusFilter extends BusEventScope {
  /** Only these event types; all types when omitted. Entries ending in `:*` match a whole subsystem. */
  types?: ReadonlyArray<string>;
}

/** Called synchronously for each matching event; a throwing handler is logged and skipped. */
export type BusHandler<K extends BusEventType = BusEventType> = (event: BusEvent<K>) => void;

/**
 * The typed event bus of one runtime (`runtime.bus`): every subsystem publishes its `BusEventMap` events here.
 */
export interface Bus {
  /** Delivers synchronously to every matching subscriber. Never throws because of a subscriber. */
  publish<K extends BusEventType>(type: K, data: BusEventMap[K], scope?: BusEventScope): BusEvent<K>;
  /**
   * Returns the unsubscribe function. With exact event types in `filter.types` the handler receives only
   * those events, typed as such (its `event.data` narrows by `event.type`); with `subsystem:*` prefixes or
   * no types, any event.
   */
  subscribe<const T extends BusEventType>(
    filter: BusEventScope & { types: ReadonlyArray<T> },
    handler: BusHandler<T>,
  ): () => void;
  subscribe(filter: BusFilter, handler: BusHandler): () => void;
  /** Typed single-type subscription. */
  on<K extends BusEventType>(type: K, handler: BusHandler<K>, scope?: BusEventScope): () => void;
  readonly subscriberCount: number;
}

export interface CreateBusOptions {
  clock?: Clock;
  logger?: Logger;
  /**
   * Applied to every payload before delivery. The runtime passes the secret redactor here, so nothing that
   * leaves through a subscriber (gateway, audit log, telemetry) can carry a known secret.
   */
  sanitize?: <T>(data: T) => T;
}

interface Subscription {
  filter: BusFilter;
  handler: BusHandler;
  exactTypes: Set<string> | undefined;
  prefixes: string[] | undefined;
}

function matches(subscription: Subscription, event: BusEvent): boolean {
  const { filter } = subscription;
  if (subscription.exactTypes || subscription.prefixes) {
    const typeMatches =
      subscription.exactTypes?.has(event.type) ||
      subscription.prefixes?.some((prefix) => event.type.startsWith(prefix));
    if (!typeMatches) return false;
  }
  if (filter.sessionKey !== undefined && filter.sessionKey !== event.sessionKey) return false;
  if (filter.agentId !== undefined && filter.agentId !== event.agentId) return false;
  if (filter.workItemId !== undefined && filter.workItemId !== event.workItemId) return false;
  if (filter.runId !== undefined && filter.runId !== event.runId) return false;
  return true;
}

/**
 * In-process typed event bus. Delivery is synchronous so ordering is exactly publish order; a subscriber
 * that throws is logged and skipped and never breaks the publisher or other subscribers.
 */
export function createBus(options: CreateBusOptions = {}): Bus {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? silentLogger;
  const sanitize = options.sanitize;
  let subscriptions: Subscription[] = [];
  let seq = 0;

  const subscribe = (filter: BusFilter, handler: BusHandler): (() => void) => {
    const exact = filter.types?.filter((type) => !type.endsWith(':*'));
    const prefixes = filter.types?.filter((type) => type.endsWith(':*')).map((type) => type.slice(0, -1));
    const subscription: Subscription = {
      filter,
      handler,
      exactTypes: filter.types ? new Set(exact) : undefined,
      prefixes: filter.types ? prefixes : undefined,
    };
    // Copy-on-write so a subscriber that unsubscribes during delivery does not disturb the loop.
    subscriptions = [...subscriptions, subscription];
    return () => {
      subscriptions = subscriptions.filter((existing) => existing !== subscription);
    };
  };

  return {
    publish(type, data, scope = {}) {
      // Field by field: a literal spreading the scope costs several times more on every publish.
      const event = {
        type,
        data: sanitize ? sanitize(data) : data,
        seq: ++seq,
        at: clock.now(),
      } as BusEvent<typeof type>;
      if (scope.sessionKey !== undefined) event.sessionKey = scope.sessionKey;
      if (scope.agentId !== undefined) event.agentId = scope.agentId;
      if (scope.workItemId !== undefined) event.workItemId = scope.workItemId;
      if (scope.runId !== undefined) event.runId = scope.runId;
      for (const subscription of subscriptions) {
        if (!matches(subscription, event as BusEvent)) continue;
        try {
          subscription.handler(event as BusEvent);
        } catch (error) {
          logger.error({ err: error, eventType: type }, 'bus subscriber threw; event delivery continues');
        }
      }
      return event;
    },
    subscribe: subscribe as Bus['subscribe'],
    on(type, handler, scope = {}) {
      return subscribe({ ...scope, types: [type] }, handler as BusHandler);
    },
    get subscriberCount() {
      return subscriptions.length;
    },
  };
}
